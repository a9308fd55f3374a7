"""The runner: the steps of a reproduction that touch the site (being moved here from
``netrepro.controller``, one concern a module)."""
