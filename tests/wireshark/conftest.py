"""Captures shared by the Wireshark tests, each dissected by one tshark run per session."""

from __future__ import annotations

import pytest
from tshark_json import dissect
from wireshark_frames import broken_cases, valid_cases, write_capture


@pytest.fixture(scope="session")
def valid_capture(tmp_path_factory):
    """The valid frames (every header kind) and the pcapng holding them."""
    cases = valid_cases()
    path = tmp_path_factory.mktemp("wireshark") / "valid.pcapng"
    write_capture(path, [c.data() for c in cases])
    return cases, path


@pytest.fixture(scope="session")
def valid(valid_capture):
    """The valid frames and what tshark shows for each."""
    cases, path = valid_capture
    return cases, dissect(path, prefs={"uet.ip_proto": "253", "uet.tss_icv": "TRUE"},
                          info=True)


@pytest.fixture(scope="session")
def broken(tmp_path_factory):
    """The broken frames and what tshark shows for each."""
    cases = broken_cases()
    path = tmp_path_factory.mktemp("wireshark") / "broken.pcapng"
    write_capture(path, [c.data for c in cases])
    return cases, dissect(path, prefs={"uet.tss_icv": "TRUE"})
