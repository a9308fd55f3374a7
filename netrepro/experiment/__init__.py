"""The experiment file: loaded and validated (spec), its sweep's points, the earlier
(schema_version 1) format's conversion (migrate) and the playbooks' variables (rolevars).
"""
