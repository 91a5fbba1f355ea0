"""The Dockerfile of a serving image for an Ascend host.

It installs ge-plugin from its sdist, so the Cython fast path compiles for the image's own Python and
architecture (Ascend hosts are often aarch64), on top of a base image the user chooses that carries CANN:
ge-plugin cannot ship or pick CANN, whose version must match the hosts' NPU driver. Into a virtual
environment of its own (base images whose Python is "externally managed", PEP 668, refuse a system-wide pip
install), with the versions the tests ran (``make dist`` puts constraints.txt beside the sdist), as a
numeric non-root user the pod's ``runAsNonRoot`` can verify. The entrypoint sources CANN's ``set_env.sh``
(pyACL and CANN's libraries) and then runs the container's arguments, which is why the Deployment gives
``args`` and never ``command``. No machine of ours has Docker or an NPU: this file is rendered, linted
(hadolint) and read by tests, never built here (docs/deploy.md).
"""

from __future__ import annotations

from ge_plugin import __version__
from ge_plugin.serve.triton import TRITON_MIN_GLIBC as MIN_GLIBC

#: where the image's virtual environment lives
VENV = "/opt/ge-plugin"
#: the image's user: the uid/gid of the host's HwHiAiUser, which owns the NPU device nodes (the CANN
#: driver's default install user); the pod runs as the same ids
NPU_UID = 1000
NPU_GID = 1000

DOCKERFILE = """\
# Serving image for ge-plugin {version} on an Ascend host; rendered by `ge-plugin deploy k8s` (docs/deploy.md).
#
# BASE_IMAGE (required) must provide:
#   - CANN (toolkit or nnrt, with pyACL) of a version that matches the hosts' NPU driver;
#   - Debian or Ubuntu with glibc {glibc} or newer (nvidia-pytriton 0.7.0's tritonserver): an Ubuntu 22.04 or
#     24.04 based CANN image works; openEuler 22.03 (glibc 2.34) does not;
#   - python3 (3.11 or 3.12; ge-plugin requires 3.11) with its headers and shared library (Triton's Python backend stub links libpython)
#     and a C compiler: the Cython fast path compiles from the sdist.
# The NPU driver is not in the image: the pod gets it from the Ascend Docker Runtime or the host.
#
#   make dist DIST=<this folder>        # in the ge-plugin checkout: the sdist and constraints.txt next to this file
#   docker build --build-arg BASE_IMAGE=<your CANN image> -t ge-plugin:{version} <this folder>
ARG BASE_IMAGE
FROM ${{BASE_IMAGE}}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# CANN's environment script: ascend-toolkit/set_env.sh up to CANN 8, cann/set_env.sh from CANN 9.
ARG CANN_SET_ENV=/usr/local/Ascend/ascend-toolkit/set_env.sh
# The host's HwHiAiUser (`id HwHiAiUser` on an NPU node): the NPU device nodes belong to its group.
ARG NPU_UID={uid}
ARG NPU_GID={gid}
ENV CANN_SET_ENV=${{CANN_SET_ENV}} \\
    GE_PLUGIN_DEVICE=ascend \\
    VIRTUAL_ENV={venv} \\
    PATH={venv}/bin:${{PATH}} \\
    HOME=/tmp \\
    PYTHONDONTWRITEBYTECODE=1 \\
    PIP_NO_CACHE_DIR=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Refuse an unsuitable base before installing anything: pip would only say "no matching distribution".
RUN test -f "$CANN_SET_ENV" || {{ echo "BASE_IMAGE has no $CANN_SET_ENV: not a CANN image (or set --build-arg CANN_SET_ENV)" >&2; exit 1; }} \\
 && python3 -c 'import os, sys; v = tuple(map(int, os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])); sys.exit(0 if v >= {glibc_tuple} else "glibc %d.%d: nvidia-pytriton 0.7.0 needs glibc {glibc} (Ubuntu 22.04 or newer)" % v)'

# libjemalloc2: `ge-plugin serve` preloads it when present. A virtual environment for the image's python3
# (Debian and Ubuntu package its ensurepip as python3-venv, installed only when venv cannot start without it).
# hadolint ignore=DL3008
RUN apt-get update \\
 && apt-get install -y --no-install-recommends libjemalloc2 \\
 && {{ python3 -m venv "$VIRTUAL_ENV" \\
      || {{ apt-get install -y --no-install-recommends python3-venv && python3 -m venv "$VIRTUAL_ENV"; }}; }} \\
 && rm -rf /var/lib/apt/lists/*

# ge-plugin from its sdist with the tested versions (PIP_CONSTRAINT reaches the sdist's build environment too).
COPY ge_plugin-{version}.tar.gz constraints.txt /tmp/ge-plugin/
RUN PIP_CONSTRAINT=/tmp/ge-plugin/constraints.txt \\
    "$VIRTUAL_ENV/bin/pip" install "/tmp/ge-plugin/ge_plugin-{version}.tar.gz[serve]" \\
 && rm -rf /tmp/ge-plugin \\
 && "$VIRTUAL_ENV/bin/python" -c "import ge_plugin.fastpath as f; assert f.IMPLEMENTATION == 'c', 'the fast path did not compile'"

# A numeric non-root user (the pod's runAsNonRoot checks the number): the host's HwHiAiUser ids, created
# unless the base image already has them.
RUN {{ getent group "$NPU_GID" >/dev/null || groupadd --gid "$NPU_GID" HwHiAiUser; }} \\
 && {{ getent passwd "$NPU_UID" >/dev/null || useradd --uid "$NPU_UID" --gid "$NPU_GID" --no-create-home --home-dir /tmp --shell /usr/sbin/nologin ge-plugin; }}
USER ${{NPU_UID}}:${{NPU_GID}}
WORKDIR /tmp

ENTRYPOINT ["/bin/bash", "-c", "source \\"$CANN_SET_ENV\\" && exec \\"$@\\"", "ge-plugin-entrypoint"]
CMD ["ge-plugin", "--help"]
"""


def dockerfile() -> str:
    return DOCKERFILE.format(
        version=__version__,
        venv=VENV,
        uid=NPU_UID,
        gid=NPU_GID,
        glibc=".".join(map(str, MIN_GLIBC)),
        glibc_tuple=repr(MIN_GLIBC),
    )
