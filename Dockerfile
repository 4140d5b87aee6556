# swtune service image: the API (`swtune serve`), migrations (`swtune db upgrade`) and simulator
# workers (`swtune worker --backend simulator`) all run from it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

COPY pyproject.toml README.md* alembic.ini ./
COPY tuner ./tuner
COPY cost_model ./cost_model
COPY db ./db
COPY service ./service
COPY swtune ./swtune
COPY cli ./cli
# httptools + uvloop: uvicorn's fast HTTP parser and event loop (the lookup path is CPU-bound)
RUN pip install . httptools uvloop

RUN useradd --create-home swtune
USER swtune
EXPOSE 8000
CMD ["swtune", "serve", "--host", "0.0.0.0", "--port", "8000"]
