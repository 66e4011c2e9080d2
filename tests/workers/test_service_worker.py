"""A service's Faust worker leaves the root logger at the service's level: Faust's own sets it to
DEBUG for its terminal spinner, so every library's debug call would build a log record."""

from __future__ import annotations

import logging
from pathlib import Path

import faust

from workers.app import ServiceWorker, make_app
from workers.settings import ServiceConfig


def root_like() -> logging.Logger:
    logger = logging.Logger("root-like", logging.WARNING)
    logger.addHandler(logging.StreamHandler())
    return logger


def test_a_service_s_worker_keeps_the_root_logger_at_its_level(tmp_path: Path) -> None:
    config = ServiceConfig.from_env("kslack", {"SITUFLOW_DATA_DIR": str(tmp_path)})
    app = make_app("situflow-test", config)
    assert app.conf.Worker is ServiceWorker
    faust_logger, service_logger = root_like(), root_like()
    faust.Worker(app).on_setup_root_logger(faust_logger, logging.WARNING)
    assert faust_logger.level == logging.DEBUG, "Faust's spinner: the reason for ServiceWorker"
    worker = ServiceWorker(app)
    worker.on_setup_root_logger(service_logger, logging.WARNING)
    assert (service_logger.level, len(service_logger.handlers)) == (logging.WARNING, 1)
    assert worker.spinner is None
