"""What a worker announces about itself (workers/announce.py): where other processes reach
its pages (``SITUFLOW_WEB_ADVERTISE``, else derived from the bind address and port)."""

from __future__ import annotations

import os
import socket

import pytest

from situflow.settings import ServiceSettings, SettingsError
from topics.catalog import SERVICES
from workers.announce import Announcer
from workers.settings import ServiceConfig


@pytest.mark.parametrize(("env", "url"), [
    ({}, "http://127.0.0.1:6066"),
    ({"SITUFLOW_WEB_BIND": "10.1.2.3", "SITUFLOW_WEB_PORT": "7000"}, "http://10.1.2.3:7000"),
    ({"SITUFLOW_WEB_BIND": "0.0.0.0"}, f"http://{socket.gethostname()}:6066"),
    ({"SITUFLOW_WEB_BIND": "::1"}, "http://[::1]:6066"),
    ({"SITUFLOW_WEB_BIND": "0.0.0.0", "SITUFLOW_WEB_ADVERTISE": "http://10.0.0.7:6066/"},
     "http://10.0.0.7:6066"),
], ids=["loopback", "an-address", "every-interface", "ipv6", "advertised"])
def test_the_url_is_the_advertised_one_else_the_bind_address_or_the_host_name(
    env: dict[str, str], url: str
) -> None:
    assert ServiceSettings.from_env(env).web_url == url


def test_an_advertised_url_must_be_http() -> None:
    with pytest.raises(SettingsError, match=r"SITUFLOW_WEB_ADVERTISE='10\.0\.0\.7:6066'"):
        ServiceSettings.from_env({"SITUFLOW_WEB_ADVERTISE": "10.0.0.7:6066"})


def test_a_worker_announces_its_service_stream_url_and_process_on_the_services_topic() -> None:
    config = ServiceConfig.from_env("deriver", {
        "SITUFLOW_STREAM": "cars", "SITUFLOW_KEY_FIELDS": "car_id", "SITUFLOW_WEB_PORT": "7001",
        "SITUFLOW_WEB_ADVERTISE": "http://10.0.0.7:7001"})
    announcer = Announcer(config)
    announcement = announcer.announcement
    host = socket.gethostname()
    assert (announcer.topic, announcement.worker, announcement.service, announcement.stream,
            announcement.url, announcement.host, announcement.pid) == (
        SERVICES, f"deriver@{host}:7001", "deriver", "cars", "http://10.0.0.7:7001", host,
        os.getpid())
