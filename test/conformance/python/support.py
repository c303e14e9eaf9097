"""Shared setup for the Python conformance suite.

The Go test in this directory (python_test.go) starts an ehsink emulator
with an AMQPS listener and Azurite, then runs this suite with
/usr/bin/python3 -m unittest. Addresses come in environment variables:

  EHSINK_PY_NAMESPACE   host:port of the AMQPS listener (port 5671: the
                        SDK ignores any other port)
  EHSINK_PY_CA          PEM file of the certificate to trust
  EHSINK_PY_KEY_NAME, EHSINK_PY_KEY   a key with all rights
  EHSINK_PY_LISTEN_KEY_NAME           a listen-only key (same key value)
  EHSINK_PY_STORAGE     Azurite connection string
  EHSINK_PY_CONTAINER   container prefix for this run
  EHSINK_PY_EHSINK_CHECKPOINTS        JSON: checkpoints ehsink wrote

Each test case uses its own event hub, declared by the Go test.
"""

import json
import os
import threading
import time
import unittest

from azure.eventhub import EventHubConsumerClient, EventHubProducerClient

DEADLINE = 60.0  # seconds; a bound for hangs, not an assertion about speed


def env(name):
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(f"{name} is not set: run this suite through `go test ./conformance/python`")
    return value


def namespace():
    return env("EHSINK_PY_NAMESPACE")


def connection_string(key_name=None, key=None):
    key_name = key_name or env("EHSINK_PY_KEY_NAME")
    key = key or env("EHSINK_PY_KEY")
    return f"Endpoint=sb://{namespace()}/;SharedAccessKeyName={key_name};SharedAccessKey={key}"


def client_kwargs():
    # The SDK always dials amqps://; it trusts the emulator's certificate
    # authority through connection_verify.
    return {"connection_verify": env("EHSINK_PY_CA"), "retry_total": 2}


def producer(hub, **kwargs):
    return EventHubProducerClient.from_connection_string(
        kwargs.pop("conn_str", None) or connection_string(), eventhub_name=hub, **client_kwargs(), **kwargs)


def consumer(hub, consumer_group="$Default", **kwargs):
    return EventHubConsumerClient.from_connection_string(
        kwargs.pop("conn_str", None) or connection_string(), consumer_group=consumer_group,
        eventhub_name=hub, **client_kwargs(), **kwargs)


def send(hub, bodies, **batch_options):
    """Sends bodies in one batch (partition_id or partition_key in
    batch_options) and returns nothing; the call returns once the service
    has stored the batch."""
    with producer(hub) as p:
        batch = p.create_batch(**batch_options)
        for body in bodies:
            batch.add(event(body))
        p.send_batch(batch)


def event(body):
    from azure.eventhub import EventData
    return EventData(body)


def eventually(cond, what, deadline=DEADLINE, interval=0.1):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {deadline}s waiting for {what}")


class Receiver:
    """Runs client.receive (which blocks) on a thread and collects events
    and errors until stopped."""

    def __init__(self, client, **receive_kwargs):
        self.client = client
        self.events = []
        self.errors = []
        self.lock = threading.Lock()
        self.kwargs = receive_kwargs
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_event(self, partition_context, ev):
        if ev is None:
            return
        # The caller's hook (a checkpoint, say) runs first, so an event
        # counts as received only once its hook is done.
        on_event = self.kwargs.get("_on_event")
        if on_event:
            on_event(partition_context, ev)
        with self.lock:
            self.events.append((partition_context.partition_id, ev))

    def _on_error(self, partition_context, err):
        with self.lock:
            self.errors.append(err)

    def _run(self):
        kwargs = {k: v for k, v in self.kwargs.items() if not k.startswith("_")}
        self.client.receive(on_event=self._on_event, on_error=self._on_error, **kwargs)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.client.close()
        self.thread.join(DEADLINE)

    def count(self):
        with self.lock:
            return len(self.events)

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def error_list(self):
        with self.lock:
            return list(self.errors)

    def wait_for(self, n, deadline=DEADLINE):
        eventually(lambda: self.count() >= n or self.error_list(), f"{n} events (errors: {self.error_list()})", deadline)
        if self.count() < n:
            raise AssertionError(f"receive failed after {self.count()} of {n} events: {self.error_list()}")
        return self.snapshot()


def receive_partition(hub, partition, n, starting_position="-1", inclusive=False, **kwargs):
    """Receives n events from one partition and returns them in order."""
    with Receiver(consumer(hub), partition_id=partition, starting_position=starting_position,
                  starting_position_inclusive=inclusive, **kwargs) as r:
        got = r.wait_for(n)
    return [ev for _, ev in got]


def ehsink_checkpoints():
    return json.loads(env("EHSINK_PY_EHSINK_CHECKPOINTS"))


def storage():
    return env("EHSINK_PY_STORAGE")


def container(name):
    """The name of this run's container `name`, created when missing
    (the Python checkpoint store expects it to exist)."""
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import ContainerClient

    full = (env("EHSINK_PY_CONTAINER") + "-" + name).lower()
    try:
        ContainerClient.from_connection_string(storage(), full).create_container()
    except ResourceExistsError:
        pass
    return full
