"""The ``swtune`` command line: one Typer app built by ``cli.app.build_app()``.

Modules: ``app`` (the app and ``main``), ``errors`` (the one domain-error handler),
``tuner_commands`` (tune, targets, check-op, compile, tune-model: the tuner in-process),
``service_commands`` (serve, worker, driver, demo, db ..., token ...), ``client_commands`` (tasks,
best, submit: a running server over HTTP), ``model_report`` (the per-layer and whole-model tables)
and ``schedule_lookup`` (where ``compile`` finds tuned schedules). Importing a module registers
nothing: commands are plain functions until ``build_app()`` adds them.

May import every package; nothing imports cli.
"""
