"""The ring of gone clients' tickets between the front and the stubs, and the ticket the front sends."""

from __future__ import annotations

import json

from ge_plugin import gone_clients
from ge_plugin.gone_clients import SLOTS, GoneClients
from ge_plugin.serve.front.forward import Incoming, Rules, prepare


def test_a_ticket_written_by_the_front_is_seen_by_a_reader_of_its_own_mapping(tmp_path):
    writer = GoneClients.create(tmp_path)
    reader = GoneClients(writer.path)
    try:
        writer.add(7)
        assert reader.contains([7, 8, 0]) == [True, False, False]
        for ticket in range(100, 100 + SLOTS):  # the ring keeps the most recent SLOTS tickets
            writer.add(ticket)
        assert reader.contains([7, 100 + SLOTS - 1]) == [False, True]
    finally:
        reader.close()
        writer.close(unlink=True)
    assert not writer.path.exists()


def test_the_front_sets_the_ticket_and_drops_one_a_client_sent():
    body = {
        "parameters": {gone_clients.PARAMETER: 5, "keep": "me"},
        "inputs": [{"name": "x", "shape": [1], "datatype": "INT64", "data": [1]}],
    }
    request = Incoming("POST", b"/v2/models/m/infer", [], json.dumps(body).encode(), ticket=42)
    sent = json.loads(prepare(request, Rules()).json)
    assert sent["parameters"] == {"keep": "me", gone_clients.PARAMETER: 42}
    request.ticket = 0
    assert json.loads(prepare(request, Rules()).json)["parameters"] == {"keep": "me"}
