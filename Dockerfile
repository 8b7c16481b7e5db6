# Peakwatch: one image for the web app and the workers.
FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PEAKWATCH_DATA_DIR=/data DJANGO_DEBUG=0
# git reads manifests at commits; g++ links the modules TVM builds; bubblewrap confines the
# tracked repositories' code a worker runs (workers/sandbox/: without it a worker refuses
# to run any, unless PEAKWATCH_SANDBOX_ALLOW_REDUCED=1); libfuse2 serves a job its checkout
# and records what it looks at (workers/sandbox/view.py; with no /dev/fuse and no right to
# mount, results are keyed by the whole tree instead).
RUN apt-get update && apt-get install -y --no-install-recommends git g++ bubblewrap libfuse2 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
COPY .ci/setup .ci/setup
# The worker's install, as on a host (docs/deployment.md): the Python packages, torch (CPU)
# and the model libraries; no front end, no test tools. Extras by name, comma-separated: a GPU
# worker's image is built with EXTRAS=cuda (NVRTC and the CUDA headers its compile needs).
# PyPI's torch for Linux is a CUDA build; PyTorch's CPU index offers the same version as
# +cpu, which pip prefers.
ARG EXTRAS=""
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN PEAKWATCH_EXTRAS="$EXTRAS" PIP_NO_CACHE_DIR=1 bash .ci/setup --worker \
    && rm -rf /var/lib/apt/lists/*
COPY . .
COPY --from=frontend /src/frontend/dist frontend/dist
# The `peakwatch` command; the code stays in /app, where the settings find frontend/dist.
RUN pip install --no-cache-dir --no-deps -e .
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput
VOLUME ["/data"]
EXPOSE 8000
CMD ["gunicorn", "dashboard.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
