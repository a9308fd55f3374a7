"""The local site: an experiment's nodes as network namespaces on this machine.

- :mod:`.site`: the site (``LocalSite``: plan, reserve, wait, logins, release, status) and its
  modes (host namespaces; a QEMU micro-VM or a UML machine when the running kernel lacks an
  experiment's qdiscs).
- :mod:`.netns`: the namespaces, veths, bridges and sshd of every node (the layout).
- :mod:`.microvm`: the virtme-ng micro-VM that runs the layout in a kernel with the qdiscs.
- :mod:`.uml`: the same in a User-Mode Linux machine.
- :mod:`.capacity`: the substrate's forwarding capacity, measured once per site.
"""
