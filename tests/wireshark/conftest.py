"""Captures shared by the Wireshark tests, each dissected by one tshark run per session;
and a private HOME for every test here, so that tshark and ``uet wireshark install`` neither
read nor write the real user's plugin and configuration folders."""

from __future__ import annotations

import pytest
from tshark_json import dissect
from wireshark_frames import broken_cases, valid_cases, write_capture

#: Environment variables that point Wireshark at a user's folders.
WIRESHARK_ENV = ("HOME", "XDG_CONFIG_HOME", "WIRESHARK_CONFIG_DIR", "APPDATA")


@pytest.fixture(scope="module", autouse=True)
def private_home(tmp_path_factory):
    """A fresh, empty HOME for each test module here (the real one is restored after)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        for k in WIRESHARK_ENV:
            mp.delenv(k, raising=False)
        mp.setenv("HOME", str(home))
        yield home


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
    return cases, dissect(path, prefs={"uet.ip_proto": "253", "uet.tss_icv": "TRUE",
                                       "uet.tss_cleartext": "TRUE"},
                          info=True)


@pytest.fixture(scope="session")
def broken(tmp_path_factory):
    """The broken frames and what tshark shows for each."""
    cases = broken_cases()
    path = tmp_path_factory.mktemp("wireshark") / "broken.pcapng"
    write_capture(path, [c.data for c in cases])
    return cases, dissect(path, prefs={"uet.tss_icv": "TRUE", "uet.tss_cleartext": "TRUE"})
