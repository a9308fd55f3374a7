"""The static site: machines the user already has, named in a YAML file (:mod:`.site`,
``StaticSite``)."""
