# Peakwatch: one image for the web app, the workers and beat.
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
# tracked repositories' code a worker runs (workers/sandbox.py: without it a worker refuses
# to run any, unless PEAKWATCH_SANDBOX_ALLOW_REDUCED=1).
RUN apt-get update && apt-get install -y --no-install-recommends git g++ bubblewrap \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
# Extras by name, comma-separated: a GPU worker's image is built with EXTRAS=cuda (NVRTC and
# the CUDA headers its compile needs).
ARG EXTRAS=""
RUN EXTRAS="$EXTRAS" python - <<'PY' > /tmp/requirements.txt && pip install --no-cache-dir -r /tmp/requirements.txt
import os, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = [name for name in os.environ["EXTRAS"].split(",") if name]
print("\n".join(project["dependencies"] + [
    d for name in extras for d in project["optional-dependencies"][name]]))
PY
COPY . .
COPY --from=frontend /src/frontend/dist frontend/dist
RUN DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput
VOLUME ["/data"]
EXPOSE 8000
CMD ["gunicorn", "dashboard.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
