"""backends/lxd/_pylxd_compat.py: what it relies on in pylxd and requests still does what
corral needs of it (pyproject.toml caps pylxd; a new release is checked here first)."""

from __future__ import annotations

import ssl

import requests
from pylxd.client import _APINode

from backends.lxd._pylxd_compat import PinnedAdapter, api_endpoint, set_content


def test_a_body_read_elsewhere_becomes_the_responses():
    response = requests.Response()
    response.status_code = 200
    assert set_content(response, b'{"metadata": [1]}') is response
    assert response.content == b'{"metadata": [1]}'
    assert response.json() == {"metadata": [1]}


def test_a_nodes_endpoint_is_the_url_it_stands_for():
    node = _APINode("http+unix://%2Frun%2Flxd.socket/1.0", requests.Session())
    files = node.instances["c1"].files
    assert api_endpoint(files) == "http+unix://%2Frun%2Flxd.socket/1.0/instances/c1/files"


def test_the_pinned_adapter_checks_the_fingerprint_with_its_own_context():
    context = ssl.create_default_context()
    adapter = PinnedAdapter(context, "ab" * 32)
    assert adapter.poolmanager.connection_pool_kw["ssl_context"] is context

    class Conn:
        pass

    conn = Conn()
    adapter.cert_verify(conn, "https://lxd.example:8443", "/no/such/cert.pem", None)
    assert conn.assert_fingerprint == "ab" * 32  # the file pylxd would read is not opened
    assert conn.cert_reqs == "CERT_NONE"  # urllib3 verifies nothing else: the pin decides
