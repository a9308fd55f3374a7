"""The instageni site: nodes reserved over the GENI AM API v3 (CloudLab, Emulab, POWDER).

- :mod:`.site`: the site (``InstaGENISite``): reserve, wait, logins, renew, release, status.
- :mod:`.aggregates`: the aggregates of ``aggregates.yml`` and how their TLS is checked.
- :mod:`.credentials`: the portal account (certificate, key, user, project, SSH keys).
- :mod:`.client`: XML-RPC over HTTPS to the slice authority and the aggregate (AM API v3).
- :mod:`.rspec`: the request RSpec (GENI RSpec v3) an experiment's topology becomes.
- :mod:`.manifest`: the logins and interfaces a manifest RSpec gives.
- ``aggregates.yml``: the aggregates by name (URLs, URNs, CA), configuration, not code.
"""
