"""Property tests: the fast codec and the scapy layers agree byte for byte and field by
field, over the full range of every field, for every header type."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether
from wire_strategies import PDS_TYPES, full_frame, uet_frame

from uet.wire import layers
from uet.wire.codec import decode_frame, decode_uet, encode_frame, encode_uet
from uet.wire.records import Frame

PDS_NAMES = {2: "RUD", 3: "ROD", 4: "RUDI_REQ", 5: "RUDI_RESP", 6: "UUD", 7: "ACK",
             8: "ACK_CC", 9: "ACK_CCX", 10: "NACK", 11: "CP", 12: "NACK_CCX", 13: "RUD_CC",
             14: "ROD_CC"}


def _check_frame(f: Frame) -> None:
    wire = encode_frame(f)
    # scapy builds exactly the same bytes from the same field values
    assert bytes(layers.frame_to_scapy(f)) == wire
    # both decoders give the record back
    assert decode_frame(wire, len(f.trailer)) == f
    assert layers.scapy_to_frame(Ether(wire), len(f.trailer)) == f


def _check_uet(f: Frame) -> None:
    wire = encode_uet(f)
    assert bytes(layers.uet_to_scapy(f)) == wire
    assert decode_uet(wire, len(f.trailer)) == f
    assert layers.scapy_to_uet(layers.UET(wire), len(f.trailer)) == f


@pytest.mark.parametrize("pds_type", PDS_TYPES, ids=[PDS_NAMES[t] for t in PDS_TYPES])
@settings(max_examples=40)
@given(data=st.data())
def test_each_pds_type(pds_type: int, data) -> None:
    _check_frame(data.draw(full_frame([pds_type])))
    _check_uet(data.draw(uet_frame([pds_type])))


@pytest.mark.parametrize("nh", [0, 1, 2, 3, 4, 5, 6],
                         ids=["none", "small", "medium", "std", "rsp", "rsp_data",
                              "rsp_data_small"])
@settings(max_examples=40)
@given(data=st.data())
def test_each_ses_header(nh: int, data) -> None:
    _check_frame(data.draw(full_frame(nhs=[nh])))


@pytest.mark.parametrize("opcode_set", ["atomic", "rendezvous"])
@settings(max_examples=40)
@given(data=st.data())
def test_extension_headers(opcode_set: str, data) -> None:
    """Frames whose SES request carries an extension header (atomic, CAS, rendezvous)."""
    if opcode_set == "atomic":
        f = data.draw(uet_frame(nhs=[1, 2, 3], opcodes=[3, 4, 13, 14]))
    else:
        f = data.draw(uet_frame(nhs=[3], opcodes=[6, 10]))
    assert f.ext is not None
    _check_uet(f)


@settings(max_examples=200)
@given(full_frame())
def test_any_frame(f: Frame) -> None:
    _check_frame(f)
