"""The fabric site: nodes of a FABRIC slice, through fablib (:mod:`.site`, ``FabricSite``)."""
