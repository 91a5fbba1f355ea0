"""The Dockerfile of a serving image for an Ascend host.

It installs ge-plugin from its sdist, so the Cython fast path compiles for the image's own Python and
architecture (Ascend hosts are often aarch64), on top of a base image the user chooses that carries CANN:
ge-plugin cannot ship or pick CANN, whose version must match the hosts' NPU driver. The entrypoint sources
CANN's ``set_env.sh`` (pyACL and CANN's libraries) and then runs the container's arguments, which is why the
Deployment gives ``args`` and never ``command``. No machine of ours has Docker or an NPU: this file is
rendered and read by tests, never built here (docs/deploy.md).
"""

from __future__ import annotations

from ge_plugin import __version__

DOCKERFILE = """\
# Serving image for ge-plugin {version} on an Ascend host; rendered by `ge-plugin deploy k8s` (docs/deploy.md).
#
# BASE_IMAGE (required) must provide:
#   - CANN (toolkit or nnrt, with pyACL) of a version that matches the hosts' NPU driver;
#   - python3 (3.9 to 3.13) with pip, its shared library (Triton's Python backend stub links libpython),
#     and a C compiler (the Cython fast path compiles from the sdist);
#   - glibc 2.35 or newer (the tritonserver bundled in nvidia-pytriton 0.7.0), e.g. Ubuntu 22.04.
# The NPU driver is not in the image: the pod mounts it from the host (/usr/local/Ascend/driver).
#
#   python -m build --sdist --outdir DIR          # in the ge-plugin checkout: DIR/ge_plugin-{version}.tar.gz
#   docker build --build-arg BASE_IMAGE=<your CANN image> -t ge-plugin:{version} DIR
ARG BASE_IMAGE
FROM ${{BASE_IMAGE}}

# CANN's environment script: ascend-toolkit/set_env.sh up to CANN 8, cann/set_env.sh from CANN 9.
ARG CANN_SET_ENV=/usr/local/Ascend/ascend-toolkit/set_env.sh
ENV CANN_SET_ENV=${{CANN_SET_ENV}} \\
    GE_PLUGIN_DEVICE=ascend \\
    PIP_NO_CACHE_DIR=1

COPY ge_plugin-{version}.tar.gz /tmp/ge-plugin/
RUN python3 -m pip install "/tmp/ge-plugin/ge_plugin-{version}.tar.gz[serve]" \\
 && rm -rf /tmp/ge-plugin \\
 && test -f "$CANN_SET_ENV" \\
 && python3 -c "import ge_plugin.fastpath as f; assert f.IMPLEMENTATION == 'c', 'the fast path did not compile'"

ENTRYPOINT ["/bin/bash", "-c", "source \\"$CANN_SET_ENV\\" && exec \\"$@\\"", "ge-plugin-entrypoint"]
CMD ["ge-plugin", "--help"]
"""


def dockerfile() -> str:
    return DOCKERFILE.format(version=__version__)
