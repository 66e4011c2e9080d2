# One image for every situflow service and command; the command selects what runs.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    # numba caches compiled kernels here: the root file system is read-only in the chart.
    NUMBA_CACHE_DIR=/tmp/numba-cache

WORKDIR /opt/situflow
COPY pyproject.toml README.md ./
COPY situflow ./situflow
COPY workers ./workers
COPY topics ./topics
# Services run as `python -m workers.kslack ...` from this directory.
ENV PYTHONPATH=/opt/situflow
RUN pip install --no-cache-dir '.[kafka]' \
    && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin situflow

USER 10001
ENTRYPOINT ["situflow"]
CMD ["--help"]
