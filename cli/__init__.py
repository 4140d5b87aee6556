"""The ``swtune`` command line: one Typer app built by ``cli.app.build_app()``. A command parses its
options, calls a workflow of the Python API (the ``swtune`` package: tune-model, compile, train,
calibrate, check-op) or the tuner, and prints the result.

Modules: ``app`` (the app and ``main``), ``errors`` (the one domain-error handler),
``tuner_commands`` (tune, targets, check-op, compile, tune-model), ``train_commands`` (train),
``calibrate_commands`` (calibrate), ``grad_commands`` (grad, check-grad), ``service_commands`` (serve,
worker, driver, demo, db ..., token ...), ``client_commands`` (tasks, best, submit: a running server over
HTTP), ``progress`` (a workflow's stages on the console), ``model_report`` and ``task_table`` (the
tables). Importing a module registers nothing: commands are plain functions until ``build_app()`` adds
them.
"""
