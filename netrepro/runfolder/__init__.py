"""The run folder, ``results/<experiment>/<run-id>/``: one package owns its format.

- :mod:`~netrepro.runfolder.layout`: its files' names and paths, and the INCOMPLETE marker;
- :mod:`~netrepro.runfolder.record`: run.json as a typed record with its version, its only
  reader and writer (an earlier version upgraded on reading, a newer one refused); timings.json;
- :mod:`~netrepro.runfolder.writing`: a new folder per run, never reused; ``latest``; the lock,
  the room kept free;
- :mod:`~netrepro.runfolder.integrity`: the raw files' sha256, recorded and checked;
- :mod:`~netrepro.runfolder.reading`: run.json read back and checked, a run recorded with a
  schema_version 1 experiment file converted;
- :mod:`~netrepro.runfolder.outputs`, :mod:`~netrepro.runfolder.atomic`: where an analysis
  writes, written once and atomically;
- :mod:`~netrepro.runfolder.cpu`: the CPU readings recorded with each trial;
- :mod:`~netrepro.runfolder.cratecheck`: a run folder exported as an RO-Crate, checked by
  roc-validator offline in its own virtual environment (``.venv-crate/``), through
  ``crate_validator_script.py``, a file it runs and nothing imports.

The runner writes run folders, the analysis reads them and adds its outputs; neither knows a
path of the format but through this package. Errors: :class:`netrepro.core.errors.RunFolderError`.
"""
