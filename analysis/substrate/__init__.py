"""The measurements of the substrate's health checks, one module by what a check reads:
machines (the nodes' and the controller's CPU and load), pings (probes answered and sent,
queueing delay), starts (the flows' and their data's starts) and queues (queue samples, the
shapers' and the paced flows' rates, the samplers' timers), with what they share in inputs.

Each check is declared once in netrepro/model/health.py (:data:`netrepro.model.HEALTH_CHECKS`);
analysis/health.py registers each measurement against its id, describes every check and
judges it.
"""
