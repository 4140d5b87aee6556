"""swtune's service: the REST API, its tuning driver, the worker agent and its HTTP client.

Kept import-free on purpose: ``service.worker`` and ``service.client`` must load without the
server-side stack (db, fastapi, sqlalchemy, xgboost).
"""
