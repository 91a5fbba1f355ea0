"""From specs to a cluster: ``ge-plugin deploy k8s`` (``render.py`` renders and writes the files; ``k8s.py``
builds the objects; ``dockerfile.py`` the image; ``ready.py`` the multi-model readiness probe).

Importing the package imports nothing: the probe (``python3 -m ge_plugin.deploy.ready``) runs every few
seconds in every pod, and importing the renderer on the way (the specs, YAML, numpy) cost it 0.26 s of CPU and
46 MB each time.
"""
