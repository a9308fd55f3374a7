"""The runner: the steps of a reproduction that touch the site, up, provision, run (trials)
and down (the analysis is the ``analysis`` package's, which the command line calls on the
run folder: the runner does not import it).

Each step is usable on its own (``netrepro up|provision|run|analyze|down``) and finds the
state of the previous ones on disk: the site's state in ``.state/<experiment>-<site>/``, the
inventory in ``inventory/<experiment>-<site>.yml``, results in
``results/<experiment>/<run-id>/`` (written once, never overwritten; ``latest`` points at
the newest complete run). A run that stops part-way is marked INCOMPLETE, keeps its completed
trials, and is resumed in its folder (:func:`netrepro.runner.run.run`,
:func:`netrepro.runner.resume.load_resume`).

One concern a module, each importing only those below it (``.importlinter`` states the order):

- ``clean``: removing what netrepro made; ``setup``: installing what a site needs;
- ``run``: a run of trials in a run folder, new or resumed (the folder's format is
  :mod:`netrepro.runfolder`'s);
- ``atonce``: trial instances at once, several simulated (``--jobs``) or one on each
  reservation of a campaign (``--parallel``);
- ``attempt``: a run as its stages share it, and one attempt at a trial instance, begun and
  concluded;
- ``instances``: its trial instances in order, their expected wall time, the dry run, and the
  run's arguments checked once for every command that runs trials;
- ``trial``: one trial instance, from arming it to its kept data and record; ``parallel``: the
  reservations of a campaign (``--parallel N``), and whether a lost one's nodes still answer;
- ``steps``: the site steps, up, provision and down, and where the site's state and inventory are;
- ``resume``: what a resumed run must match, checked before anything is written;
- ``barrier``: the synchronized start of a trial on every node;
- ``playbooks``: ansible-playbook runs, ended on a signal, and why one failed;
- ``trialvars``: a trial's variables for playbooks/trial.yml, the rate and time scales;
- ``checks``: the nodes' clocks and whether a trial's data covers its schedule;
- ``fetch``: a trial's data from the nodes, unpacked, and the nodes' recorded settings;
- ``ssh``: the nodes over SSH as Ansible reaches them, and the connections kept open to them;
- ``console``: the runner's lines, the account of a step that stopped, the command to run next;
  ``progress``: the live display of a run;
- ``ansible``: Ansible's runner (ansible-runner) and its settings; ``schedule``: the order of
  trial instances.
"""
