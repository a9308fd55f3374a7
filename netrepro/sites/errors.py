"""The error of every site: :class:`SiteError`, below the sites' shared modules
(:mod:`netrepro.sites.options`, :mod:`netrepro.sites.login`, :mod:`netrepro.sites.base`) so
that each can raise it."""

from __future__ import annotations


class SiteError(RuntimeError):
    """A site cannot do what was asked; the message says what is missing and where to set it."""
