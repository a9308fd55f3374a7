"""The command line (``python -m netrepro``): its commands, the site commands, ``make bench`` and the
reference page's generator. The top layer: it calls the runner and the analysis.
"""
