"""The instageni site: nodes reserved over the GENI AM API v3 (CloudLab, Emulab, POWDER).

- :mod:`.site`: the site (``InstaGENISite``), its aggregates, credentials and XML-RPC client.
- :mod:`.rspec`: the request RSpec (GENI RSpec v3) an experiment's topology becomes.
- :mod:`.manifest`: the logins and interfaces a manifest RSpec gives.
- ``aggregates.yml``: the aggregates by name (URLs, URNs, CA), configuration, not code.
"""
