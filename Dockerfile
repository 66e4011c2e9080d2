# syntax=docker/dockerfile:1
# One image for every situflow service and command; the command selects what runs
# (`situflow serve kslack`, `situflow query submit ...`). Three targets:
#   runtime  the services and the CLI (the kafka extra)
#   spark    runtime + Debian's Java 17 runtime + the spark extra, for the Spark jobs
#   gpu      runtime + pyopencl and Debian's OpenCL drivers, for services on iGPU nodes
# Build, run and the read-only root: README.md, "Container image".
#
# The base is an exact Python release on an exact Debian release, not a digest: the official
# python tags are rebuilt for each Debian security update, so a digest freezes the build that
# happened to be current while the tag keeps getting fixes; and no digest could be resolved or
# checked where this file was written (no registry access). Where builds must be identical bit for
# bit, pin the digest in the CI that pushes (e.g. Renovate's pinDigests) rather than by hand.
# docker/build-local.sh swaps in a locally bootstrapped Debian base through this argument.
ARG PYTHON_IMAGE=python:3.11.15-slim-bookworm

# Wheels of situflow and of everything runtime installs, so that it installs offline and no
# compiler or build backend reaches a shipped image.
FROM ${PYTHON_IMAGE} AS builder
WORKDIR /src
COPY pyproject.toml README.md ./
COPY situflow ./situflow
COPY workers ./workers
COPY topics ./topics
COPY batch ./batch
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check \
       --wheel-dir /wheels '.[kafka]'

FROM ${PYTHON_IMAGE} AS runtime
# Writes go to /tmp (an emptyDir in the chart: numba's compiled kernels, HOME's caches) and to
# the two volumes; the root file system can be read-only.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    SITUFLOW_DATA_DIR=/var/lib/situflow \
    SITUFLOW_ARCHIVE_DIR=/var/lib/situflow-archive \
    SITUFLOW_WEB_BIND=0.0.0.0 \
    SITUFLOW_WEB_PORT=6066
# The wheels are bind-mounted, not copied: they would stay in a layer of the image.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
       --find-links /wheels 'situflow[kafka]' \
    && groupadd --gid 10001 situflow \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin situflow \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/situflow /var/lib/situflow-archive \
    && install -d -m 0755 /opt/situflow
# Made above: some builders leave a WORKDIR to the container runtime, which cannot create it on
# a read-only root.
WORKDIR /opt/situflow
USER 10001:10001
EXPOSE 6066
ENTRYPOINT ["situflow"]
CMD ["--help"]

# The spark extra's wheels besides, in a stage of their own after runtime, so that building
# runtime does not fetch Spark. pyspark comes as source: --use-pep517 builds it even where the
# build venv's pip has no wheel package at hand.
FROM builder AS spark-builder
RUN /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check --use-pep517 \
    --find-links /wheels --wheel-dir /wheels '.[kafka,spark]'

# Java and Spark double the image, so the services' image leaves them out: spark adds about
# 780 MB to runtime's 760 MB (uncompressed, measured on docker/build-local.sh's build): the JRE
# with its libraries ~205 MB, pyspark ~490 MB (its jars 462 MB), pandas ~80 MB.
FROM runtime AS spark
USER 0:0
# openjdk's postinst needs the man directory that slim images leave out. JAVA_HOME names a link,
# so that it holds on every architecture (the JRE's directory is java-17-openjdk-<arch>).
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && ln -s "java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17
RUN --mount=type=bind,from=spark-builder,source=/wheels,target=/wheels \
    /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
    --find-links /wheels 'situflow[kafka,spark]'
ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python
USER 10001:10001

# The services on iGPU nodes (the chart's devices.gpu): runtime plus pyopencl and Debian's
# OpenCL drivers, Intel's compute runtime (Gen8 and later iGPUs; amd64 only) and Mesa's (AMD).
# The pyopencl wheel's ICD loader finds them in /etc/OpenCL/vendors. PoCL, the devices extra's
# CPU device for machines without a GPU, is left out: on a GPU node it would only duplicate
# the CPU paths. The node's render group opens /dev/dri (devices.gpu.supplementalGroups).
FROM builder AS gpu-builder
RUN /opt/build/bin/pip wheel --no-cache-dir --disable-pip-version-check \
    --find-links /wheels --wheel-dir /wheels 'pyopencl>=2024.1'

FROM runtime AS gpu
USER 0:0
RUN drivers=mesa-opencl-icd \
    && if [ "$(dpkg --print-architecture)" = amd64 ]; then drivers="$drivers intel-opencl-icd"; fi \
    && apt-get update \
    && apt-get install -y --no-install-recommends $drivers \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=gpu-builder,source=/wheels,target=/wheels \
    /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-index \
    --find-links /wheels 'pyopencl>=2024.1'
USER 10001:10001
