# Tucano's container image: `docker build -t tucano .` (docs/operations.md, "Deploying").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The package and its dependencies in a virtual environment of their own; the source goes after.
COPY pyproject.toml README.md /build/
COPY src /build/src
RUN python3 -m venv /opt/tucano \
    && /opt/tucano/bin/pip install /build \
    && rm -rf /build

# A user of its own, no login, owning only the data directory (SQLite's file, if used).
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/tucano --create-home \
        --shell /usr/sbin/nologin tucano
USER tucano
WORKDIR /var/lib/tucano

ENV PATH=/opt/tucano/bin:$PATH \
    TUCANO_DATABASE_URL=sqlite+aiosqlite:////var/lib/tucano/tucano.db \
    TUCANO_LOG_FORMAT=json
VOLUME /var/lib/tucano
EXPOSE 8000

# /health/live answers while the process does, without the database (a liveness check: a
# database outage should not get the container restarted; /health/ready answers for readiness).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python3", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health/live', timeout=2).status != 200)"]

# SIGTERM (docker stop) is a graceful stop; give it time: `docker stop --time 60`.
STOPSIGNAL SIGTERM
# exec: tucano serve is the container's main process, and gets the SIGTERM itself.
CMD ["sh", "-c", "tucano migrate && exec tucano serve --host 0.0.0.0 --port 8000 --no-migrate"]
