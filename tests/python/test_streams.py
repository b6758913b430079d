"""Watches, informers and pod logs as Python iterators: iteration, breaking out, closing from
another thread, Ctrl-C, and the node simulator's logs."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from typing import List

import pytest
from conftest import config_map, pod, wait_running

import tfk8s


def interrupt_after(seconds: float) -> threading.Timer:
    """Sends SIGINT to this process (pytest runs tests in the main thread) after `seconds`."""
    timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


# ---- raw watch ------------------------------------------------------------------------------
def test_watch_yields_events_and_breaks_out(client: tfk8s.Client, namespace: str) -> None:
    start = client.list("v1", "ConfigMap", namespace)["metadata"]["resourceVersion"]
    client.create(config_map("w1", {"v": "1"}), namespace)
    client.patch("v1", "ConfigMap", "w1", {"data": {"v": "2"}}, namespace)
    client.delete("v1", "ConfigMap", "w1", namespace)
    seen: List[tfk8s.WatchEvent] = []
    with client.watch("v1", "ConfigMap", namespace, resource_version=start) as events:
        assert isinstance(events, tfk8s.Watch)
        for event in events:
            if event.name != "w1":
                continue
            seen.append(event)
            if event.type == "DELETED":
                break
        assert not events.closed  # breaking out leaves it open; leaving the with closes it
    assert events.closed
    assert [e.type for e in seen] == ["ADDED", "MODIFIED", "DELETED"]
    kind, obj = seen[1]  # events unpack like tuples
    assert kind == "MODIFIED" and obj["data"] == {"v": "2"}
    assert seen[0].namespace == namespace
    assert "closed" in repr(events)


def test_watch_next_with_timeout_and_server_end(client: tfk8s.Client, namespace: str) -> None:
    events = client.watch("v1", "ConfigMap", namespace, label_selector="x=y", timeout_seconds=1)
    start = time.monotonic()
    assert events.next(timeout=0.3) is None  # nothing happened
    assert 0.25 < time.monotonic() - start < 2
    assert list(events) == []  # the server ends the watch after timeout_seconds
    assert events.closed
    assert events.next(timeout=0.1) is None


def test_watch_selectors_and_bookmarks(client: tfk8s.Client, namespace: str) -> None:
    with client.watch("v1", "ConfigMap", namespace, label_selector="pick=me",
                      field_selector=f"metadata.namespace={namespace}") as events:
        client.create(config_map("skip"), namespace)
        client.create(config_map("take", pick="me"), namespace)
        event = events.next(timeout=10)
        assert event is not None and event.name == "take" and event.type == "ADDED"


def test_watch_closed_from_another_thread(client: tfk8s.Client, namespace: str) -> None:
    events = client.watch("v1", "ConfigMap", namespace, label_selector="never=matches")
    threading.Timer(0.5, events.close).start()
    start = time.monotonic()
    assert list(events) == []
    assert time.monotonic() - start < 5
    assert events.closed


def test_watch_interrupted_by_ctrl_c(client: tfk8s.Client, namespace: str) -> None:
    events = client.watch("v1", "ConfigMap", namespace)
    timer = interrupt_after(0.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        for _ in events:
            pass
    timer.join()
    assert time.monotonic() - start < 3
    assert events.closed  # an interrupted stream is closed, not left open in a traceback


def test_watch_dropped_without_closing(client: tfk8s.Client, namespace: str) -> None:
    for _ in range(20):
        events = client.watch("v1", "ConfigMap", namespace)
        events.next(timeout=0.01)
        del events
    gc.collect()
    # The client still works (no leaked streams blocking it).
    assert client.list("v1", "ConfigMap", namespace)["kind"] == "ConfigMapList"


def test_watch_error_event_is_raised(client: tfk8s.Client, namespace: str) -> None:
    # A resourceVersion the server cannot serve: Gone (410) as an ERROR event or a response.
    with pytest.raises((tfk8s.Gone, tfk8s.Invalid, tfk8s.BadRequest, tfk8s.ServerError)):
        with client.watch("v1", "ConfigMap", namespace, resource_version="not-a-version") as w:
            w.next(timeout=10)


# ---- informer -------------------------------------------------------------------------------
def test_informer_lists_then_watches(client: tfk8s.Client, namespace: str) -> None:
    client.create(config_map("before-1"), namespace)
    client.create(config_map("before-2"), namespace)
    with client.informer("v1", "ConfigMap", namespace, watch_timeout=1) as informer:
        assert isinstance(informer, tfk8s.Informer)
        initial = {informer.next(timeout=10).name, informer.next(timeout=10).name}
        assert {"before-1", "before-2"} <= initial | {
            e.name for e in iter(lambda: informer.next(timeout=0.5), None)}
        client.create(config_map("after"), namespace)
        client.delete("v1", "ConfigMap", "before-1", namespace)
        seen = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(seen) < 2:
            event = informer.next(timeout=1)
            if event and event.name in ("after", "before-1"):
                seen.append((event.type, event.name))
        assert seen == [("ADDED", "after"), ("DELETED", "before-1")]
        names = sorted(o["metadata"]["name"] for o in informer.snapshot())
        assert "after" in names and "before-1" not in names
        assert int(informer.resource_version) > 0
        assert informer.relist_count == 0
        saved = informer.resource_version

    # Resuming from a saved version: no initial list, only later changes.
    client.create(config_map("later"), namespace)
    with client.informer("v1", "ConfigMap", namespace, resource_version=saved) as resumed:
        event = resumed.next(timeout=10)
        assert event is not None and (event.type, event.name) == ("ADDED", "later")


def test_informer_run_and_close(client: tfk8s.Client, namespace: str) -> None:
    for i in range(3):
        client.create(config_map(f"r-{i}", app="run"), namespace)
    informer = client.informer("v1", "ConfigMap", namespace, label_selector="app=run")
    names: List[str] = []

    def on_event(event: tfk8s.WatchEvent) -> bool:
        names.append(event.name)
        return len(names) < 3

    informer.run(on_event)
    assert sorted(names) == ["r-0", "r-1", "r-2"]
    threading.Timer(0.3, informer.close).start()
    assert list(informer) == []
    assert informer.closed


def test_informer_interrupted_by_ctrl_c(client: tfk8s.Client) -> None:
    informer = client.informer("v1", "Namespace")
    timer = interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        for _ in informer:
            pass
    timer.join()
    assert informer.closed


# ---- logs -----------------------------------------------------------------------------------
LOG_ANNOTATIONS = {"sim.tfk8s.io/log-lines": "a\nb", "sim.tfk8s.io/log-interval": "1"}


def test_logs(client: tfk8s.Client, namespace: str) -> None:
    client.create(pod("talker", LOG_ANNOTATIONS), namespace)
    wait_running(client, namespace, "talker")
    text = client.logs("talker", namespace)
    assert text.startswith("a\nb\n")
    assert client.logs("talker", namespace, container="main", tail_lines=1).count("\n") == 1
    stamped = client.logs("talker", namespace, timestamps=True).splitlines()[0]
    assert stamped.endswith(" a") and stamped[:4].isdigit()
    assert client.logs("talker", namespace, limit_bytes=2) == "a\n"
    assert client.logs("talker", namespace, since_seconds=3600).startswith("a\n")

    lines = client.stream_logs("talker", namespace, follow=False)
    assert isinstance(lines, tfk8s.LogLines)
    assert list(lines)[:2] == ["a", "b"]
    assert lines.closed

    with client.stream_logs("talker", namespace) as following:  # follow=True
        got = [following.next(timeout=10) for _ in range(3)]
    assert got[:2] == ["a", "b"] and got[2].startswith("tick ")
    assert following.closed

    with pytest.raises(tfk8s.NotFound):
        client.logs("no-such-pod", namespace)
    with pytest.raises(tfk8s.BadRequest):
        client.logs("talker", namespace, container="no-such-container")


def test_followed_logs_break_and_ctrl_c(client: tfk8s.Client, namespace: str) -> None:
    client.create(pod("ticker", LOG_ANNOTATIONS), namespace)
    wait_running(client, namespace, "ticker")
    lines = client.stream_logs("ticker", namespace, tail_lines=1)
    for line in lines:
        if line.startswith("tick"):
            break
    lines.close()
    assert lines.closed and lines.next(timeout=0.1) is None

    lines = client.stream_logs("ticker", namespace)
    timer = interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        for _ in lines:
            pass
    timer.join()
    assert lines.closed
