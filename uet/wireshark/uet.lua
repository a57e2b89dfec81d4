-- uet.lua: Wireshark / tshark dissector for the Ultra Ethernet Transport (UEC 1.0),
-- as emitted by the `uet` emulator.
--
-- SPDX-License-Identifier: Apache-2.0
--
-- Works on Wireshark 4.0 and later (Lua 5.2): no 64-bit bit masks on ProtoFields, every
-- 64-bit sub-field is computed here with UInt64 arithmetic.
--
-- Field names are the ones of Wireshark's own UET dissector (epan/dissectors/packet-uet.c,
-- commit 2e69f352), so display filters and columns carry over. Where that dissector and our
-- wire format (docs/wire-format.md) disagree, our layout wins; every such
-- difference, and every field added here, is listed in docs/wireshark.md.
--
-- Load it with `uet wireshark install` (copies it into Wireshark's personal Lua plugin
-- folder, ~/.local/lib/wireshark/plugins/ on Linux) or by hand:
-- `wireshark -X lua_script:PATH/uet.lua`. Loading it twice (an installed copy plus
-- -X lua_script) keeps the first copy and ignores the second, saying so when the two files
-- differ: a second registration would take the dissector tables under another protocol
-- name and every uet.* filter would match nothing.
--
-- The canonical copy is uet/wireshark/uet.lua (shipped as package data);
-- tools/wireshark/uet.lua is a symbolic link to it.

local PLUGIN_VERSION = "0.2.0"

-------------------------------------------------------------------------------- one copy only

-- Every Lua plugin of a Wireshark process shares one global table: the first copy of this
-- file to run leaves its path there, and later copies stop before registering anything.
local THIS_FILE = (debug.getinfo(1, "S").source or ""):gsub("^@", "")
do
    local first = rawget(_G, "uet_lua_plugin")
    if first then
        local function contents(path)
            local f = io.open(path, "rb")
            if not f then
                return nil
            end
            local text = f:read("*a")
            f:close()
            return text
        end
        local a, b = contents(first.path), contents(THIS_FILE)
        if first.path ~= THIS_FILE and (a == nil or a ~= b) then
            report_failure(string.format(
                "uet.lua: %s was not loaded: another copy of the UET dissector (version %s, " ..
                "%s) is loaded already and stays in use; remove one of them (uet wireshark " ..
                "install replaces the installed copy, and an installed copy needs no " ..
                "-X lua_script)", THIS_FILE, first.version, first.path))
        end
        return
    end
    rawset(_G, "uet_lua_plugin", { version = PLUGIN_VERSION, path = THIS_FILE })
end

if set_plugin_info then
    set_plugin_info({
        version = PLUGIN_VERSION,
        description = "Ultra Ethernet Transport (UEC 1.0) dissector of the uet emulator",
        repository = "uet: uet/wireshark/uet.lua",
    })
end

local bit = bit32 or bit
local band, bor, bxor, rshift, lshift = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift

-------------------------------------------------------------------------------- protocols

-- If this Wireshark already has a native protocol called "uet" (its development tree does),
-- registering ours under the same name fails: fall back to the "uetlua" prefix so both can
-- be loaded side by side (then filter on uetlua.* instead of uet.*).
local PFX = "uet"
local uet
do
    local ok, p = pcall(Proto, "uet", "Ultra Ethernet Transport")
    if ok then
        uet = p
    else
        PFX = "uetlua"
        uet = Proto("uetlua", "Ultra Ethernet Transport (uet.lua)")
    end
end
-- Second entry point: UET directly over IP, where a 4-byte entropy header comes first.
local uet_ip = Proto(PFX .. "_ip", "Ultra Ethernet Transport over IP (" .. PFX .. ".lua)")

local function A(name)  -- "uet.pds.psn" -> "<PFX>.pds.psn"
    return PFX .. name:sub(4)
end

-------------------------------------------------------------------------------- value tables

local PDS_TYPE = {
    [0] = "Reserved", [1] = "TSS", [2] = "RUD_REQ", [3] = "ROD_REQ", [4] = "RUDI_REQ",
    [5] = "RUDI_RESP", [6] = "UUD_REQ", [7] = "ACK", [8] = "ACK_CC", [9] = "ACK_CCX",
    [10] = "NACK", [11] = "CP", [12] = "NACK_CCX", [13] = "RUD_CC_REQ", [14] = "ROD_CC_REQ",
}
local NEXT_HDR = {
    [0] = "NONE", [1] = "REQ_SMALL", [2] = "REQ_MEDIUM", [3] = "REQ_STD", [4] = "RSP",
    [5] = "RSP_DATA", [6] = "RSP_DATA_SMALL",
}
local CTL_TYPE = {
    [0] = "NOOP", [1] = "ACK_REQ", [2] = "CLEAR", [3] = "CLEAR_REQ", [4] = "CLOSE",
    [5] = "CLOSE_REQ", [6] = "PROBE", [7] = "CREDIT", [8] = "CREDIT_REQ", [9] = "NEGOTIATION",
}
local CTL_PAYLOAD = {
    [0] = "null", [1] = "[0x0000, message ID] or 0", [2] = "clear PSN", [3] = "PSN to clear",
    [4] = "null", [5] = "null", [6] = "SACK bitmap base PSN", [7] = "credit allocation",
    [8] = "credit request", [9] = "negotiation",
}
local ACK_REQ = {
    [0] = "NONE (no request)", [1] = "CLEAR (request clear)", [2] = "CLOSE (request close)",
    [3] = "Reserved",
}
local NACK_CODE = {
    [0x00] = "NONE", [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x03] = "TRIMMED_ACK",
    [0x04] = "NO_PDC_AVAIL", [0x05] = "NO_CCC_AVAIL", [0x06] = "NO_BITMAP",
    [0x07] = "NO_PKT_BUFFER", [0x08] = "NO_GTD_DEL_AVAIL", [0x09] = "NO_SES_MSG_AVAIL",
    [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW", [0x0C] = "Reserved (0x0C)",
    [0x0D] = "ROD_OOO", [0x0E] = "INV_DPDCID", [0x0F] = "PDC_HDR_MISMATCH",
    [0x10] = "CLOSING", [0x11] = "CLOSING_IN_ERR", [0x12] = "PKT_NOT_RCVD",
    [0x13] = "GTD_RESP_UNAVAIL", [0x14] = "ACK_WITH_DATA", [0x15] = "INVALID_SYN",
    [0x16] = "PDC_MODE_MISMATCH", [0x17] = "NEW_START_PSN", [0x18] = "RCVD_SES_PROCG",
    [0x19] = "UNEXP_EVENT", [0x1A] = "RCVR_INFER_LOSS", [0xFD] = "EXP_NACK_NORMAL",
    [0xFE] = "EXP_NACK_ERR", [0xFF] = "EXP_NACK_FATAL",
}
local CC_TYPE = { [0] = "NSCC", [1] = "CREDIT" }
local SES_OPCODE = {
    [0x00] = "NO_OP", [0x01] = "WRITE", [0x02] = "READ", [0x03] = "ATOMIC",
    [0x04] = "FETCHING_ATOMIC", [0x05] = "SEND", [0x06] = "RENDEZVOUS_SEND",
    [0x07] = "DATAGRAM_SEND", [0x08] = "DEFERRABLE_SEND", [0x09] = "TAGGED_SEND",
    [0x0A] = "RENDEZVOUS_TSEND", [0x0B] = "DEFERRABLE_TSEND", [0x0C] = "DEFERRABLE_RTR",
    [0x0D] = "TSEND_ATOMIC", [0x0E] = "TSEND_FETCH_ATOMIC", [0x0F] = "MSG_ERROR",
}
local RSP_OPCODE = {
    [0] = "DEFAULT_RESPONSE", [1] = "RESPONSE", [2] = "RESPONSE_W_DATA", [3] = "NO_RESPONSE",
}
local RSP_LIST = { [0] = "EXPECTED", [1] = "OVERFLOW", [2] = "VENDOR_2", [3] = "VENDOR_3" }
local RETURN_CODE = {
    [0x00] = "NULL", [0x01] = "OK", [0x02] = "BAD_GENERATION", [0x03] = "DISABLED",
    [0x04] = "DISABLED_GEN", [0x05] = "NO_MATCH", [0x06] = "UNSUPPORTED_OP",
    [0x07] = "UNSUPPORTED_SIZE", [0x08] = "AT_INVALID", [0x09] = "AT_PERM",
    [0x0A] = "AT_ATS_ERROR", [0x0B] = "AT_NO_TRANS", [0x0C] = "AT_OUT_OF_RANGE",
    [0x0D] = "HOST_POISONED", [0x0E] = "HOST_UNSUCCESS_CMPL", [0x0F] = "AMO_UNSUPPORTED_OP",
    [0x10] = "AMO_UNSUPPORTED_DT", [0x11] = "AMO_UNSUPPORTED_SIZE", [0x12] = "AMO_UNALIGNED",
    [0x13] = "AMO_FP_NAN", [0x14] = "AMO_FP_UNDERFLOW", [0x15] = "AMO_FP_OVERFLOW",
    [0x16] = "AMO_FP_INEXACT", [0x17] = "PERM_VIOLATION", [0x18] = "OP_VIOLATION",
    [0x19] = "BAD_INDEX", [0x1A] = "BAD_PID", [0x1B] = "BAD_JOB_ID", [0x1C] = "BAD_MKEY",
    [0x1D] = "BAD_ADDR", [0x1E] = "CANCELLED", [0x1F] = "UNDELIVERABLE", [0x20] = "UNCOR",
    [0x21] = "UNCOR_TRNSNT", [0x22] = "TOO_LONG", [0x23] = "INITIATOR_ERR",
    [0x24] = "DROPPED",
}
local ATOMIC_OPCODE = {
    [0x00] = "MIN", [0x01] = "MAX", [0x02] = "SUM", [0x03] = "DIFF", [0x04] = "PROD",
    [0x05] = "LOR", [0x06] = "LAND", [0x07] = "BOR", [0x08] = "BAND", [0x09] = "LXOR",
    [0x0A] = "BXOR", [0x0B] = "READ", [0x0C] = "WRITE", [0x0D] = "CSWAP",
    [0x0E] = "CSWAP_NE", [0x0F] = "CSWAP_LE", [0x10] = "CSWAP_LT", [0x11] = "CSWAP_GE",
    [0x12] = "CSWAP_GT", [0x13] = "MSWAP", [0x14] = "INVAL",
}
local ATOMIC_DATATYPE = {
    [0x00] = "INT8", [0x01] = "UINT8", [0x02] = "INT16", [0x03] = "UINT16", [0x04] = "INT32",
    [0x05] = "UINT32", [0x06] = "INT64", [0x07] = "UINT64", [0x08] = "INT128",
    [0x09] = "UINT128", [0x0A] = "FLOAT", [0x0B] = "DOUBLE", [0x0C] = "FLOAT_COMPLEX",
    [0x0D] = "DOUBLE_COMPLEX", [0x0E] = "LONG_DOUBLE", [0x0F] = "LONG_DOUBLE_COMPLEX",
    [0x10] = "BF16", [0x11] = "FP16",
}
local SEM_CTL = {
    [0] = "None", [1] = "CACHEABLE", [2] = "CPU_COHERENT", [3] = "CACHEABLE, CPU_COHERENT",
}
local TSS_TYPE = { [1] = "TSS" }
local PDC_DIR = { [0] = "initiator to target", [1] = "target to initiator" }
local CKSUM_STATUS = { [0] = "Bad", [1] = "Good", [2] = "Unverified", [3] = "Not present" }

local TFS_YES_NO = { "Yes", "No" }
local TFS_SET = { "Set", "Not set" }
local TFS_PRESENT = { "Present", "Not present" }
local TFS_REL = { "Relative Addressing", "Absolute Addressing" }
local TFS_NT = { "RUDI (PSN field is a packet ID)", "RUD/ROD" }
local TFS_ISROD = { "ROD PDC", "RUD PDC" }

-------------------------------------------------------------------------------- fields

local F = {}       -- "uet.xxx" -> ProtoField
local order = {}   -- registration order

local function field(name, pf)
    F[name] = pf
    order[#order + 1] = pf
end
local function u8(n, label, b, vs, m) field(n, ProtoField.uint8(A(n), label, b, vs, m)) end
local function u16(n, label, b, vs, m) field(n, ProtoField.uint16(A(n), label, b, vs, m)) end
local function u24(n, label, b, vs, m) field(n, ProtoField.uint24(A(n), label, b, vs, m)) end
local function u32(n, label, b, vs, m) field(n, ProtoField.uint32(A(n), label, b, vs, m)) end
local function u64(n, label, b) field(n, ProtoField.uint64(A(n), label, b)) end
local function i16(n, label) field(n, ProtoField.int16(A(n), label, base.DEC)) end
local function bool(n, label, bits, tfs, m) field(n, ProtoField.bool(A(n), label, bits, tfs, m)) end
local function bytes(n, label) field(n, ProtoField.bytes(A(n), label)) end

local DEC, HEX, DEC_HEX = base.DEC, base.HEX, base.DEC_HEX

-- TSS
bytes("uet.tss", "TSS")
u32("uet.tss.type", "Type", DEC, TSS_TYPE, 0xf8000000)
bool("uet.tss.sp", "SP", 32, TFS_SET, 0x04000000)
u32("uet.tss.reserved", "Reserved", HEX, nil, 0x02000000)
u32("uet.tss.an", "AN", DEC, nil, 0x01000000)
u32("uet.tss.sdi", "SDI", DEC, nil, 0x00ffffff)
u32("uet.tss.ssi", "SSI", DEC)
u64("uet.tss.tsc", "TSC", HEX)
u16("uet.tss.epoch", "Epoch", DEC)                                  -- ours
bytes("uet.tss.icv", "ICV (AES-GCM tag)")                            -- ours
bool("uet.tss.decrypted", "Decrypted and authenticated", base.NONE, TFS_YES_NO)  -- ours
bytes("uet.tss.encrypted", "Encrypted data")                         -- ours

-- entropy header (native IP)
u16("uet.pds.entropy", "Entropy", DEC_HEX)
u16("uet.pds.entropy.rsvd", "Reserved (entropy)", HEX)

-- PDS
bytes("uet.pds", "PDS Layer")
u16("uet.pds.type", "Type", DEC, PDS_TYPE, 0xf800)
u16("uet.pds.nh", "Next Hdr", DEC, NEXT_HDR, 0x0780)
u16("uet.pds.ctl_type", "Ctl Type", DEC, CTL_TYPE, 0x0780)
u16("uet.pds.flags", "Flags", HEX, nil, 0x007f)
bool("uet.pds.flags.m", "ECN Marked (M)", 8, TFS_YES_NO, 0x20)
bool("uet.pds.flags.retx", "Retransmitted (RETX)", 8, TFS_YES_NO, 0x10)
bool("uet.pds.flags.ar", "ACK Request (AR)", 8, TFS_YES_NO, 0x08)
bool("uet.pds.flags.p", "Probe Packet (P)", 8, TFS_YES_NO, 0x08)
bool("uet.pds.flags.nt", "NACK Type (NT)", 8, TFS_NT, 0x08)
bool("uet.pds.flags.syn", "New PDC (SYN)", 8, TFS_YES_NO, 0x04)
u8("uet.pds.flags.req", "Request (REQ)", DEC, ACK_REQ, 0x06)
bool("uet.pds.flags.isrod", "PDC is ROD (isROD)", 8, TFS_ISROD, 0x20)          -- ours
bool("uet.pds.flags.epsn", "Expected PSN present (EPSN)", 8, TFS_YES_NO, 0x40)  -- ours
u8("uet.pds.flags.rsvd_rud_rod", "Reserved", HEX, nil, 0x63)
u16("uet.pds.flags.rsvd_uud", "Reserved", HEX, nil, 0x003f)
u8("uet.pds.flags.rsvd_ctl", "Reserved", HEX)    -- value computed: 0x43 (0x20 is isROD)
u8("uet.pds.flags.rsvd_ack", "Reserved", HEX)    -- value computed: 0x01 (ACK), 0x41 (ACK_CC/CCX)
u16("uet.pds.flags.rsvd_rudi", "Reserved", HEX, nil, 0x004f)
u8("uet.pds.flags.rsvd_nack", "Reserved", HEX, nil, 0x47)
u32("uet.pds.clear_psn", "Clear PSN", DEC)
i16("uet.pds.clear_psn_offset", "Clear PSN offset")                -- ours
u32("uet.pds.psn", "PSN", DEC)
u32("uet.pds.ack_psn", "ACK PSN", DEC)
i16("uet.pds.ack_psn_offset", "ACK PSN offset")                    -- ours
u32("uet.pds.cack_psn", "Cumulative ACK PSN", DEC)
u16("uet.pds.spdcid", "Source PDC ID", DEC)
u16("uet.pds.dpdcid", "Destination PDC ID", DEC)
u32("uet.pds.nack.psn", "NACK PSN", DEC)
u8("uet.pds.nack.code", "NACK Code", DEC, NACK_CODE)
u8("uet.pds.nack.vendor_code", "Vendor Code", DEC)
u32("uet.pds.nack.max_recv_psn_plus_1", "Payload (Max Recvd PSN + 1)", DEC)
u8("uet.pds.nack.nccx_type", "NACK CCX Type", DEC, nil, 0xf0)      -- ours
u64("uet.pds.nack.nccx_state1", "NACK CCX State 1 (60 bits)", HEX)  -- ours
u64("uet.pds.nack.nccx_state2", "NACK CCX State 2", HEX)            -- ours
u8("uet.pds.pdc_mode", "PDC Mode", DEC)
bool("uet.pds.pdc_mode_use_rsv", "Use Reserved PDC", 8, TFS_YES_NO, 0x80)
u8("uet.pds.pdc_mode_rsv", "Reserved", HEX, nil, 0x70)
u16("uet.pds.psn_offset", "PSN offset", DEC, nil, 0x0fff)
u32("uet.pds.start_psn", "Start PSN", DEC)
u8("uet.pds.cc_state.ccc_id", "CCC ID", DEC)
u24("uet.pds.cc_state.credit_target", "Credit Target", HEX)
u16("uet.pds.ctrl_probe_opaque", "Probe Opaque", HEX)
u32("uet.pds.ctrl_payload", "Payload", HEX)
bytes("uet.pds.ack.prlg", "ACK Ext Hdr")
u8("uet.pds.ack.cc_type", "CC Type", DEC, CC_TYPE, 0xf0)
u8("uet.pds.ack.cc_flags", "CC Flags", HEX, nil, 0x0f)             -- ours
u8("uet.pds.ack.mpr", "Maximum PSN range (MPR)", DEC)
u16("uet.pds.ack.sack_offset", "SACK Offset", DEC)
u32("uet.pds.sack_base", "SACK base PSN", DEC)                    -- ours
u32("uet.pds.sack_psn", "SACKed PSN", DEC)                        -- ours
bytes("uet.pds.ack.cc_state", "CC State")
bytes("uet.pds.ack.ccx_state", "CCX State")
u64("uet.pds.ack.sack_bitmap", "SACK BITMAP", HEX)
u16("uet.pds.ack.cc_state.service_time", "Service Time", DEC)
bool("uet.pds.ack.cc_state.rc", "Restore Cwnd", 8, nil, 0x80)
u8("uet.pds.ack.cc_state.rcv_cwnd_pend", "Cwnd Penalty", DEC, nil, 0x7f)
u24("uet.pds.ack.cc_state.credit", "Credit", DEC)
u24("uet.pds.ack.cc_state.rcvd_bytes", "Received Byte Count", DEC)
bytes("uet.pds.ack.cc_state.reserved", "Reserved")
u16("uet.pds.ack.cc_state.ooo_count", "Out Of Order Count", DEC)
u32("uet.pds.ack.epsn", "Expected PSN (EPSN)", DEC)                -- ours
u16("uet.pds.ack.probe_opaque", "Probe Opaque (echoed)", HEX)       -- ours
u16("uet.pds.rudi.rsvd", "Reserved", HEX)
u32("uet.pds.rudi.pkt_id", "RUDI ID", DEC)
u16("uet.pds.uud.rsvd", "Reserved", HEX)                            -- ours
u32("uet.payload_len", "Payload length (after the UET headers)", DEC) -- ours

-- PDC tracking (ours)
u32("uet.pdc", "PDC index")
u8("uet.pdc.dir", "PDC direction", DEC, PDC_DIR)
field("uet.pdc.first_frame", ProtoField.framenum(A("uet.pdc.first_frame"), "PDC first seen in frame"))
u16("uet.pdc.initiator_pdcid", "Initiator PDC ID", DEC)

-- SES standard request
bytes("uet.ses", "SES")
u8("uet.ses.std.flags", "Flags", HEX)
u8("uet.ses.std.rsv", "Reserved(R)", HEX, nil, 0xc0)
u8("uet.ses.std.opcode", "Opcode", DEC, SES_OPCODE, 0x3f)
u8("uet.ses.std.ver", "Version", DEC, nil, 0xc0)
bool("uet.ses.std.dc", "Delivery Complete (DC)", 8, TFS_YES_NO, 0x20)
bool("uet.ses.std.ie", "Initiator Error (IE)", 8, TFS_YES_NO, 0x10)
bool("uet.ses.std.rel", "Relative", 8, TFS_REL, 0x08)
bool("uet.ses.std.hd", "Header Data", 8, TFS_PRESENT, 0x04)
bool("uet.ses.std.eom", "End of Msg(EOM)", 8, TFS_YES_NO, 0x02)
bool("uet.ses.std.som", "Start of Msg(SOM)", 8, TFS_YES_NO, 0x01)
u16("uet.ses.std.message_id", "Message ID", DEC)
u8("uet.ses.std.index_generation", "Index Generation", DEC)
u32("uet.ses.std.job_id", "Job ID", DEC)
u16("uet.ses.std.reserved2", "Reserved", HEX, nil, 0xf000)
u16("uet.ses.std.pidonfep", "PIDonFEP", DEC, nil, 0x0fff)
u16("uet.ses.std.reserved3", "Reserved", HEX, nil, 0xf000)
u16("uet.ses.std.resource_index", "Resource Index (RI)", DEC, nil, 0x0fff)
u64("uet.ses.std.buffer_offset", "Buffer Offset", DEC_HEX)
u64("uet.ses.std.restart_token", "Restart Token", HEX)
u32("uet.ses.std.initiator", "Initiator", HEX)
u64("uet.ses.std.mem_key_match_bits", "Memory Key/Match Bits", HEX)
u64("uet.ses.std.header_data", "Header Data", HEX)
u32("uet.ses.std.reserved4", "Reserved", HEX, nil, 0xffffc000)
u32("uet.ses.std.payload_length", "Payload Length", DEC, nil, 0x3fff)
u32("uet.ses.std.message_offset", "Message Offset", DEC)
u32("uet.ses.std.request_length", "Request Length", DEC)

-- atomic extension (4 B)
bytes("uet.ses.atomic_op_ext_hdr", "Atomic Operation Extension Header")
u8("uet.ses.atomic_op_ext_hdr.atomic_opcode", "Atomic Opcode", DEC, ATOMIC_OPCODE)
u8("uet.ses.atomic_op_ext_hdr.atomic_data_type", "Atomic Data type", DEC, ATOMIC_DATATYPE)
u8("uet.ses.atomic_op_ext_hdr.sem_ctl", "Semantic Control", DEC, SEM_CTL)
u8("uet.ses.atomic_op_ext_hdr.rsvd", "Rsvd", HEX)

-- rendezvous extension (24 B)
bytes("uet.ses.rendv_ext_hdr", "Rendezvous Extension Header")
u32("uet.ses.rendv_ext_hdr.eager_length", "Eager Length", DEC)
u16("uet.ses.rendv_ext_hdr.reserved", "Reserved", HEX, nil, 0xc000)      -- WS layout only
u32("uet.ses.rendv_ext_hdr.read_pid_on_fep", "Read PIDonFEP", DEC, nil, 0x00fff000)
u16("uet.ses.rendv_ext_hdr.reserved2", "Reserved", HEX, nil, 0xf000)     -- WS layout only
u16("uet.ses.rendv_ext_hdr.read_resource_index", "Read Resource Index", DEC, nil, 0x0fff)
u8("uet.ses.rendv_ext_hdr.read_ri_generation", "Read Index Generation", DEC)  -- ours
u64("uet.ses.rendv_ext_hdr.read_offset", "Read Offset", HEX)
u64("uet.ses.rendv_ext_hdr.read_match_bits", "Read Memory Key", HEX)

-- compare-and-swap extension (36 B)
bytes("uet.ses.comp_swap_ext_hdr", "Compare and Swap Operation Atomic Header")
u8("uet.ses.comp_swap_ext_hdr.atomic_opcode", "Atomic Opcode", DEC, ATOMIC_OPCODE)
u8("uet.ses.comp_swap_ext_hdr.atomic_data_type", "Atomic Data type", DEC, ATOMIC_DATATYPE)
u8("uet.ses.comp_swap_ext_hdr.sem_ctl", "Semantic Control", DEC, SEM_CTL)
u8("uet.ses.comp_swap_ext_hdr.rsvd", "Rsvd", HEX)
bytes("uet.ses.comp_swap_ext_hdr.comp_value", "Compare Value")
bytes("uet.ses.comp_swap_ext_hdr.swap_value", "Swap Value")

-- responses
u8("uet.ses.rsp.list", "List", DEC, RSP_LIST, 0xc0)
u8("uet.ses.rsp.opcode", "Opcode", DEC, RSP_OPCODE, 0x3f)
u8("uet.ses.rsp.ver", "Version", DEC, nil, 0xc0)
u8("uet.ses.rsp.return_code", "Return Code", DEC, RETURN_CODE, 0x3f)
u16("uet.ses.rsp.message_id", "Response Message ID", DEC)
u8("uet.ses.rsp.resource_index_gen", "Resource Index generation", DEC)
u32("uet.ses.rsp.job_id", "Job ID", DEC)
u32("uet.ses.rsp.mod_length", "Modified Length", DEC)
u8("uet.ses.rsp.reserved", "Reserved", HEX)
u16("uet.ses.rsp.read_req_message_id", "Message ID", DEC)
u16("uet.ses.rsp.reserved2", "Reserved", HEX, nil, 0xc000)
u16("uet.ses.rsp.payload_length", "Payload Length", DEC, nil, 0x3fff)
u32("uet.ses.rsp.message_offset", "Message Offset", DEC)
u16("uet.ses.rsp.reserved3", "Rsv", HEX, nil, 0xc000)
u32("uet.ses.rsp.original_request_psn", "Original Request PSN", DEC)    -- ours

-- small request (20 B)
u8("uet.ses.small_req.rsv", "Reserved", HEX, nil, 0xc0)
u8("uet.ses.small_req.flags", "Flags", HEX)
u8("uet.ses.small_req.flags.ver", "Version", DEC, nil, 0xc0)
bool("uet.ses.small_req.flags.dc", "Delivery Complete (DC)", 8, TFS_YES_NO, 0x20)
bool("uet.ses.small_req.flags.ie", "Initiator Error (IE)", 8, TFS_YES_NO, 0x10)
bool("uet.ses.small_req.flags.rel", "Relative", 8, TFS_REL, 0x08)
u8("uet.ses.small_req.flags.rsvd", "Reserved", DEC, nil, 0x04)
bool("uet.ses.small_req.eom", "End of Msg(EOM)", 8, TFS_YES_NO, 0x02)
bool("uet.ses.small_req.som", "Start of Msg(SOM)", 8, TFS_YES_NO, 0x01)
u16("uet.ses.small_req.flags.rsv2", "Reserved", HEX, nil, 0xc000)
u16("uet.ses.small_req.req_length", "Request Length", DEC, nil, 0x3fff)
u8("uet.ses.small_req.index_generation", "Index Generation", DEC)
u24("uet.ses.small_req.job_id", "Job ID", DEC)
u16("uet.ses.small_req.rsv3", "Reserved", HEX, nil, 0xf000)
u16("uet.ses.small_req.pidonfep", "PIDonFEP", DEC, nil, 0x0fff)
u16("uet.ses.small_req.rsv4", "Reserved", HEX, nil, 0xf000)
u16("uet.ses.small_req.resource_index", "Resource Index", DEC, nil, 0x0fff)
u64("uet.ses.small_req.buffer_offset", "Buffer Offset", DEC_HEX)

-- medium request (32 B)
u8("uet.ses.med_req.rsv", "Reserved", HEX, nil, 0xc0)
u8("uet.ses.med_req.flags", "Flags", HEX)
u8("uet.ses.med_req.flags.ver", "Version", DEC, nil, 0xc0)
bool("uet.ses.med_req.flags.dc", "Delivery Complete (DC)", 8, TFS_YES_NO, 0x20)
bool("uet.ses.med_req.flags.ie", "Initiator Error (IE)", 8, TFS_YES_NO, 0x10)
bool("uet.ses.med_req.flags.rel", "Relative", 8, TFS_REL, 0x08)
bool("uet.ses.med_req.flags.hd", "HD", 8, TFS_PRESENT, 0x04)
bool("uet.ses.med_req.eom", "End of Msg(EOM)", 8, TFS_YES_NO, 0x02)
bool("uet.ses.med_req.som", "Start of Msg(SOM)", 8, TFS_YES_NO, 0x01)
u16("uet.ses.med_req.flags.rsv2", "Reserved", HEX, nil, 0xc000)
u16("uet.ses.med_req.req_length", "Request Length", DEC, nil, 0x3fff)
u8("uet.ses.med_req.resource_index_generation", "Resource Index Generation", DEC)
u24("uet.ses.med_req.job_id", "Job ID", DEC)
u16("uet.ses.med_req.rsv3", "Reserved", HEX, nil, 0xf000)
u16("uet.ses.med_req.pidonfep", "PIDonFEP", DEC, nil, 0x0fff)
u16("uet.ses.med_req.rsv4", "Reserved", HEX, nil, 0xf000)
u16("uet.ses.med_req.resource_index", "Resource Index", DEC, nil, 0x0fff)
u64("uet.ses.med_req.buffer_offset", "Buffer Offset", DEC_HEX)
u64("uet.ses.med_req.header_data", "Header Data", DEC_HEX)
u32("uet.ses.med_req.initiator", "Initiator", HEX)
u64("uet.ses.med_req.mem_key_match_bits", "Match Bits/Memory Key", HEX)

-- trimming (ours)
bool("uet.trimmed", "Trimmed by a switch (DSCP)", base.NONE, TFS_YES_NO)

-- checksums (ours)
u8("uet.udp_checksum.status", "UDP checksum status", DEC, CKSUM_STATUS)
u16("uet.udp_checksum.calculated", "UDP checksum (calculated)", HEX)
u32("uet.crc32c", "CRC-32C trailer", HEX)
u32("uet.crc32c.calculated", "CRC-32C (calculated)", HEX)
u8("uet.crc32c.status", "CRC-32C status", DEC, CKSUM_STATUS)

uet.fields = order

-------------------------------------------------------------------------------- expert infos

local E = {}
local function expert_def(key, name, text, group, severity)
    E[key] = ProtoExpert.new(A(name), text, group, severity)
end
local G, S = expert.group, expert.severity
-- the six of Wireshark's dissector
expert_def("pds_len", "uet.pds.invalid_header", "Invalid PDS header length", G.MALFORMED, S.ERROR)
expert_def("req_len", "uet.pds.rud_rod.invalid_header", "Invalid PDS RUD/ROD header length",
    G.MALFORMED, S.ERROR)
expert_def("ack_len", "uet.pds.ack.invalid_header", "Invalid PDS ACK header length",
    G.MALFORMED, S.ERROR)
expert_def("rsp_opcode", "uet.ses.rsp.invalid_opcode", "Invalid SES Resp opcode",
    G.MALFORMED, S.ERROR)
expert_def("ses_len", "uet.ses.invalid_header", "Invalid SES header length", G.MALFORMED, S.ERROR)
expert_def("tss_len", "uet.tss.invalid_header", "Invalid TSS header length", G.MALFORMED, S.ERROR)
-- ours
expert_def("pds_type", "uet.pds.unknown_type", "Unknown PDS type", G.MALFORMED, S.ERROR)
expert_def("nh_unknown", "uet.pds.unknown_nh", "Unknown next header", G.MALFORMED, S.ERROR)
expert_def("nh_mismatch", "uet.pds.nh_mismatch", "Next header not allowed after this PDS type",
    G.MALFORMED, S.ERROR)
expert_def("ctl_unknown", "uet.pds.unknown_ctl_type", "Unknown control packet type",
    G.PROTOCOL, S.WARN)
expert_def("nack_code", "uet.pds.nack.unknown_code", "Reserved or unknown NACK code",
    G.PROTOCOL, S.WARN)
expert_def("reserved", "uet.reserved_set", "Reserved bits set", G.PROTOCOL, S.WARN)
expert_def("ses_opcode", "uet.ses.unknown_opcode", "Unknown SES request opcode",
    G.PROTOCOL, S.WARN)
expert_def("ses_mismatch", "uet.ses.inconsistent", "SES header inconsistent with its opcode",
    G.PROTOCOL, S.WARN)
expert_def("ses_version", "uet.ses.unsupported_version", "Unsupported SES version",
    G.PROTOCOL, S.WARN)
expert_def("short_payload", "uet.ses.short_payload",
    "Fewer payload bytes than the header announces (trimmed?)", G.PROTOCOL, S.NOTE)
expert_def("udp_bad", "uet.udp_checksum.bad", "Bad UDP checksum", G.CHECKSUM, S.ERROR)
expert_def("crc_bad", "uet.crc32c.bad", "Bad CRC-32C trailer", G.CHECKSUM, S.ERROR)
expert_def("tss_auth", "uet.tss.auth_failed", "TSS authentication failed", G.CHECKSUM, S.ERROR)
expert_def("trailer_short", "uet.trailer.missing", "Packet too short for the configured trailer",
    G.MALFORMED, S.ERROR)

uet.experts = { E.pds_len, E.req_len, E.ack_len, E.rsp_opcode, E.ses_len, E.tss_len,
    E.pds_type, E.nh_unknown, E.nh_mismatch, E.ctl_unknown, E.nack_code, E.reserved,
    E.ses_opcode, E.ses_mismatch, E.ses_version, E.short_payload, E.udp_bad,
    E.crc_bad, E.trailer_short, E.tss_auth }

-------------------------------------------------------------------------------- preferences

local CRC_ORDER = { { 1, "big-endian", 0 }, { 2, "little-endian", 1 } }

uet.prefs.udp_port = Pref.uint("UDP port", 4793,
    "UDP destination port of UET over UDP (the entropy value rides in the source port)")
uet.prefs.ip_proto = Pref.uint("IP protocol (native mode)", 253,
    "IP protocol number of UET directly over IPv4/IPv6 with the 4-byte entropy header "
        .. "(0 disables native mode)")
uet.prefs.check_udp_checksum = Pref.bool("Verify the UDP checksum", true,
    "Verify non-zero UDP checksums of UET packets (zero means no checksum over IPv4)")
uet.prefs.crc_trailer = Pref.bool("CRC-32C trailer", false,
    "Packets without TSS end with a 4-byte CRC-32C over the IP addresses and the IP payload")
uet.prefs.crc_byte_order = Pref.enum("CRC-32C byte order", 0,
    "Byte order of the CRC-32C trailer on the wire", CRC_ORDER, false)
uet.prefs.tss_icv = Pref.bool("TSS packets end with a 16-byte ICV", true,
    "With a TSS header, the last 16 bytes are the AES-GCM integrity check value")
uet.prefs.tss_keys = Pref.string("TSS key file", "",
    "Key file of the secure domains (the uet key-file format: 'SDI MODE KEY [job=N ...]' "
        .. "per line, docs/tss.md): packets of those SDIs are authenticated and decrypted")
uet.prefs.tss_cleartext = Pref.bool("Dissect after a TSS header without a key", false,
    "Without a key for the SDI, dissect what follows a TSS header as if it were cleartext "
        .. "(synthetic header samples); off: show it as encrypted data")
uet.prefs.trimmed_dscp = Pref.string("DSCPs of trimmed packets", "12,14",
    "Comma-separated DSCP values switches give to trimmed packets (uet.fabric defaults: "
        .. "12 trimmed, 14 trimmed at the last hop); such packets get uet.trimmed")
uet.prefs.track_pdc = Pref.bool("Group packets by PDC", true,
    "Give every packet of a PDC the same uet.pdc index (key: initiator IP, target IP, "
        .. "initiator PDC ID)")

-------------------------------------------------------------------------------- helpers

local TWO32 = 4294967296

local function psn_add(a, d)
    return (a + d) % TWO32
end

local function name_of(tbl, v)
    return tbl[v] or string.format("Unknown (%d)", v)
end

-- SES headers allowed after each PDS type (same table as uet/wire/rules.py).
local REQ_NH = { [1] = true, [2] = true, [3] = true }
local function set(...)
    local t = {}
    for _, v in ipairs({ ... }) do t[v] = true end
    return t
end
local ALLOWED_NH = {
    [2] = set(1, 2, 3, 5, 6), [3] = set(1, 2, 3, 5, 6),
    [13] = set(1, 2, 3, 5, 6), [14] = set(1, 2, 3, 5, 6),
    [4] = set(1, 2, 3), [5] = set(0, 4, 5, 6), [6] = set(1, 2, 3),
    [7] = set(0, 4, 5, 6), [8] = set(0, 4, 5, 6), [9] = set(0, 4, 5, 6),
    [10] = set(0, 1, 2, 3, 4, 5, 6), [12] = set(0, 1, 2, 3, 4, 5, 6),
}
local PDS_LEN = { [2] = 12, [3] = 12, [13] = 16, [14] = 16, [4] = 8, [5] = 8, [6] = 4,
    [7] = 12, [8] = 32, [9] = 40, [10] = 16, [11] = 16, [12] = 32 }
local SES_LEN = { [1] = 20, [2] = 32, [3] = 44, [4] = 12, [5] = 20, [6] = 12 }
local ATOMIC_OPS = set(0x03, 0x04, 0x0D, 0x0E)
local RNDV_OPS = set(0x06, 0x0A)
local CAS_AOPS = set(0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12)

local function reserved(item, what, value)
    if value ~= 0 then
        item:add_proto_expert_info(E.reserved,
            string.format("Reserved bits set in %s: 0x%x", what, value))
    end
end

-------------------------------------------------------------------------------- checksums

local function sum16(s, acc)
    local n = #s
    local i = 1
    while i < n do
        local a, b = s:byte(i, i + 1)
        acc = acc + a * 256 + b
        i = i + 2
    end
    if i == n then
        acc = acc + s:byte(n) * 256
    end
    return acc
end

local function fold16(acc)
    while acc > 0xffff do
        acc = (acc % 65536) + math.floor(acc / 65536)
    end
    return acc
end

local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then
            c = bxor(rshift(c, 1), 0x82F63B78)
        else
            c = rshift(c, 1)
        end
    end
    CRC_TABLE[i] = c
end

local function crc32c(s, crc)
    crc = bxor(crc or 0, 0xffffffff)
    for i = 1, #s do
        crc = bxor(CRC_TABLE[band(bxor(crc, s:byte(i)), 0xff)], rshift(crc, 8))
    end
    return bxor(crc, 0xffffffff)
end

local fx = {
    ip_dscp = Field.new("ip.dsfield.dscp"), ipv6_dscp = Field.new("ipv6.tclass.dscp"),
    ip_src = Field.new("ip.src"), ip_dst = Field.new("ip.dst"),
    ipv6_src = Field.new("ipv6.src"), ipv6_dst = Field.new("ipv6.dst"),
    udp_srcport = Field.new("udp.srcport"), udp_dstport = Field.new("udp.dstport"),
    udp_length = Field.new("udp.length"), udp_checksum = Field.new("udp.checksum"),
}

local function last(f)
    local t = { f() }
    return t[#t]
end

-- Innermost IP addresses (raw bytes) of this packet and whether they are IPv6.
local function ip_addresses()
    local s4, d4, s6, d6 = last(fx.ip_src), last(fx.ip_dst), last(fx.ipv6_src), last(fx.ipv6_dst)
    if s6 and d6 and (not s4 or s6.offset > s4.offset) then
        return s6.range:raw(), d6.range:raw(), true
    end
    if s4 and d4 then
        return s4.range:raw(), d4.range:raw(), false
    end
    return nil
end

-- DSCP of the innermost IP header, or nil
local function ip_dscp()
    local d4, d6 = last(fx.ip_dscp), last(fx.ipv6_dscp)
    if d6 and (not d4 or d6.offset > d4.offset) then
        return d6.value
    end
    return d4 and d4.value
end

local trimmed_set, trimmed_pref = {}, nil
local function is_trimmed_dscp(dscp)
    if trimmed_pref ~= uet.prefs.trimmed_dscp then
        trimmed_pref = uet.prefs.trimmed_dscp
        trimmed_set = {}
        for v in string.gmatch(trimmed_pref or "", "%d+") do
            trimmed_set[tonumber(v)] = true
        end
    end
    return dscp ~= nil and trimmed_set[dscp] == true
end

-------------------------------------------------------------------------------- PDC tracking

local pdc_index = {}   -- key -> {index=, first=}
local pdc_count = 0
local frame_pdc = {}   -- frame number -> {index=, dir=, first=, ini=}

-- Which end sent this packet: true = the PDC's initiator, false = its target.
local TARGET_CTL = set(3, 5, 7)  -- CLEAR_REQ, CLOSE_REQ, CREDIT
local function sent_by_initiator(ptype, nh, nack_nt)
    if ptype == 2 or ptype == 3 or ptype == 13 or ptype == 14 then
        return not (nh == 5 or nh == 6)  -- requests carrying read-response data: target
    elseif ptype == 7 or ptype == 8 or ptype == 9 or ptype == 10 or ptype == 12 then
        return false
    elseif ptype == 11 then
        return not TARGET_CTL[nh]
    end
    return nil
end

local function track_pdc(ctx, ptype, nh, spdcid, dpdcid)
    if not uet.prefs.track_pdc then
        return
    end
    local pinfo = ctx.pinfo
    local rec = frame_pdc[pinfo.number]
    if not rec or not pinfo.visited then
        local by_ini = sent_by_initiator(ptype, nh)
        if by_ini == nil then
            return
        end
        local src, dst = tostring(pinfo.src), tostring(pinfo.dst)
        local function key(ini)
            if ini then
                return src .. "|" .. dst .. "|" .. spdcid, spdcid
            end
            return dst .. "|" .. src .. "|" .. dpdcid, dpdcid
        end
        local k, ini_id = key(by_ini)
        if not pdc_index[k] then
            local k2, ini_id2 = key(not by_ini)
            if pdc_index[k2] then
                k, ini_id, by_ini = k2, ini_id2, not by_ini
            end
        end
        local entry = pdc_index[k]
        if not entry then
            pdc_count = pdc_count + 1
            entry = { index = pdc_count, first = pinfo.number }
            pdc_index[k] = entry
        end
        rec = { index = entry.index, dir = by_ini and 0 or 1, first = entry.first, ini = ini_id }
        frame_pdc[pinfo.number] = rec
    end
    local it = ctx.root:add(F["uet.pdc"], rec.index)
    it:set_generated()
    local sub = it
    sub:add(F["uet.pdc.dir"], rec.dir):set_generated()
    sub:add(F["uet.pdc.initiator_pdcid"], rec.ini):set_generated()
    sub:add(F["uet.pdc.first_frame"], rec.first):set_generated()
    ctx.pdc = rec.index
end

function uet.init()
    pdc_index = {}
    pdc_count = 0
    frame_pdc = {}
end

-------------------------------------------------------------------------------- TSS

local function dissect_tss(ctx, o, stop)
    local tvb, root = ctx.tvb, ctx.root
    local avail = stop - o
    if avail < 4 then
        root:add_proto_expert_info(E.tss_len,
            string.format("TSS header must be at least 12 bytes (%d available)", avail))
        return nil
    end
    local w = tvb(o, 4):uint()
    local sp = band(w, 0x04000000) ~= 0
    local hl = sp and 16 or 12
    local item = root:add(F["uet.tss"], tvb(o, math.min(hl, avail)))
    item:set_text(string.format("TSS: SDI %d, AN %d%s", band(w, 0xffffff),
        band(rshift(w, 24), 1), sp and ", SSI present" or ""))
    item:add(F["uet.tss.type"], tvb(o, 4))
    item:add(F["uet.tss.sp"], tvb(o, 4))
    item:add(F["uet.tss.reserved"], tvb(o, 4))
    item:add(F["uet.tss.an"], tvb(o, 4))
    item:add(F["uet.tss.sdi"], tvb(o, 4))
    reserved(item, "the TSS header", band(w, 0x02000000))
    if avail < hl then
        item:add_proto_expert_info(E.tss_len,
            string.format("TSS header must be at least %d bytes (%d available)", hl, avail))
        return nil
    end
    local p = o + 4
    if sp then
        item:add(F["uet.tss.ssi"], tvb(p, 4))
        p = p + 4
    end
    local ti = item:add(F["uet.tss.tsc"], tvb(p, 8))
    ti:add(F["uet.tss.epoch"], tvb(p, 2))
    ctx.info[#ctx.info + 1] = "TSS"
    ctx.tss = { sdi = band(w, 0xffffff), an = band(rshift(w, 24), 1), sp = sp,
                ssi = sp and tvb(o + 4, 4):uint() or 0, epoch = tvb(p, 2):uint(),
                tsc_hi = tvb(p + 2, 2):uint(), tsc_lo = tvb(p + 4, 4):uint(),
                raw = tvb:raw(o, hl), start = o, hl = hl, item = item }
    return o + hl
end

-------------------------------------------------------------------------------- TSS crypto

-- AES-256, GCM and AES-CMAC in plain Lua 5.2 (bit32): Wireshark's Lua has no AES binding,
-- and this dissector must run on a stock Wireshark. Only what decrypting a capture needs:
-- the AES-256 block encryption (FIPS-197), GCM decryption with the tag check (NIST SP
-- 800-38D: CTR from J0 = IV || 0x00000001, GHASH over AAD and ciphertext), CMAC (SP
-- 800-38B) and the SP 800-108 counter-mode KDF of the TSS key modes (docs/tss.md). Slow
-- (a few ms per KiB) but exact; a known-answer check runs once before first use.
local bxor, bor, lshift = bit32.bxor, bit32.bor, bit32.lshift

local SBOX, MUL2, MUL3 = {}, {}, {}
do
    local function rotl8(x, s)
        return band(bor(lshift(x, s), rshift(x, 8 - s)), 0xff)
    end
    local p, q = 1, 1
    repeat
        p = band(bxor(p, lshift(p, 1), band(p, 0x80) ~= 0 and 0x1b or 0), 0xff)
        q = band(bxor(q, lshift(q, 1)), 0xff)
        q = band(bxor(q, lshift(q, 2)), 0xff)
        q = band(bxor(q, lshift(q, 4)), 0xff)
        if band(q, 0x80) ~= 0 then
            q = bxor(q, 0x09)
        end
        SBOX[p] = bxor(q, rotl8(q, 1), rotl8(q, 2), rotl8(q, 3), rotl8(q, 4), 0x63)
    until p == 1
    SBOX[0] = 0x63
    for x = 0, 255 do
        local d = band(lshift(x, 1), 0xff)
        if band(x, 0x80) ~= 0 then
            d = bxor(d, 0x1b)
        end
        MUL2[x], MUL3[x] = d, bxor(d, x)
    end
end

-- the 240-byte AES-256 key schedule of a 32-byte key (a Lua string)
local function aes_expand(key)
    local w = { key:byte(1, 32) }
    local rcon = 1
    for i = 33, 240, 4 do
        local t1, t2, t3, t4 = w[i - 4], w[i - 3], w[i - 2], w[i - 1]
        local n = (i - 1) / 4
        if n % 8 == 0 then
            t1, t2, t3, t4 = bxor(SBOX[t2], rcon), SBOX[t3], SBOX[t4], SBOX[t1]
            rcon = MUL2[rcon]
        elseif n % 8 == 4 then
            t1, t2, t3, t4 = SBOX[t1], SBOX[t2], SBOX[t3], SBOX[t4]
        end
        w[i], w[i + 1] = bxor(w[i - 32], t1), bxor(w[i - 31], t2)
        w[i + 2], w[i + 3] = bxor(w[i - 30], t3), bxor(w[i - 29], t4)
    end
    return w
end

-- encrypt one block given as a table of 16 bytes; returns a new table
local function aes_block(w, b)
    local s = {}
    for i = 1, 16 do
        s[i] = bxor(b[i], w[i])
    end
    local t = {}
    for round = 1, 14 do
        for i = 1, 16 do
            t[i] = SBOX[s[i]]
        end
        -- ShiftRows: row r of column c takes column (c + r) % 4
        s[1], s[5], s[9], s[13] = t[1], t[5], t[9], t[13]
        s[2], s[6], s[10], s[14] = t[6], t[10], t[14], t[2]
        s[3], s[7], s[11], s[15] = t[11], t[15], t[3], t[7]
        s[4], s[8], s[12], s[16] = t[16], t[4], t[8], t[12]
        local k = 16 * round
        if round < 14 then
            for c = 1, 13, 4 do
                local a0, a1, a2, a3 = s[c], s[c + 1], s[c + 2], s[c + 3]
                s[c] = bxor(MUL2[a0], MUL3[a1], a2, a3, w[k + c])
                s[c + 1] = bxor(a0, MUL2[a1], MUL3[a2], a3, w[k + c + 1])
                s[c + 2] = bxor(a0, a1, MUL2[a2], MUL3[a3], w[k + c + 2])
                s[c + 3] = bxor(MUL3[a0], a1, a2, MUL2[a3], w[k + c + 3])
            end
        else
            for i = 1, 16 do
                s[i] = bxor(s[i], w[k + i])
            end
        end
    end
    return s
end

local function bytes_of(str, i)  -- 16 bytes of str from position i (1-based), zero padded
    local b = { str:byte(i, i + 15) }
    for j = #b + 1, 16 do
        b[j] = 0
    end
    return b
end

local function str_of(b, n)
    return string.char(table.unpack(b, 1, n or #b))
end

-- GF(2^128) multiplication of GHASH (SP 800-38D, algorithm 1), blocks as 4 big-endian
-- 32-bit words
local function gf_mul(x, h)
    local z1, z2, z3, z4 = 0, 0, 0, 0
    local v1, v2, v3, v4 = h[1], h[2], h[3], h[4]
    for wi = 1, 4 do
        local xw = x[wi]
        for bit = 31, 0, -1 do
            if band(xw, lshift(1, bit)) ~= 0 then
                z1, z2, z3, z4 = bxor(z1, v1), bxor(z2, v2), bxor(z3, v3), bxor(z4, v4)
            end
            local lsb = band(v4, 1)
            v4 = bor(rshift(v4, 1), lshift(band(v3, 1), 31))
            v3 = bor(rshift(v3, 1), lshift(band(v2, 1), 31))
            v2 = bor(rshift(v2, 1), lshift(band(v1, 1), 31))
            v1 = rshift(v1, 1)
            if lsb ~= 0 then
                v1 = bxor(v1, 0xe1000000)
            end
        end
    end
    return { z1, z2, z3, z4 }
end

local function words(b)  -- 16 bytes -> 4 words
    return { bor(lshift(b[1], 24), lshift(b[2], 16), lshift(b[3], 8), b[4]),
             bor(lshift(b[5], 24), lshift(b[6], 16), lshift(b[7], 8), b[8]),
             bor(lshift(b[9], 24), lshift(b[10], 16), lshift(b[11], 8), b[12]),
             bor(lshift(b[13], 24), lshift(b[14], 16), lshift(b[15], 8), b[16]) }
end

local function ghash_update(y, h, str)
    for i = 1, #str, 16 do
        local x = words(bytes_of(str, i))
        y = gf_mul({ bxor(y[1], x[1]), bxor(y[2], x[2]), bxor(y[3], x[3]), bxor(y[4], x[4]) },
            h)
    end
    return y
end

local function be32(v)
    return string.char(band(rshift(v, 24), 0xff), band(rshift(v, 16), 0xff),
        band(rshift(v, 8), 0xff), band(v, 0xff))
end

-- AES-256-GCM decryption of ctext (a string) with a 12-byte IV; nil when the 16-byte tag
-- does not verify, else the plaintext
local function gcm_open(w, iv, aad, ctext, tag)
    local h = words(aes_block(w, bytes_of("", 1)))
    local out = {}
    local ctr = 2
    for i = 1, #ctext, 16 do
        local ks = aes_block(w, bytes_of(iv .. be32(ctr), 1))
        local c = { ctext:byte(i, math.min(i + 15, #ctext)) }
        for j = 1, #c do
            c[j] = bxor(c[j], ks[j])
        end
        out[#out + 1] = str_of(c)
        ctr = ctr + 1
    end
    local y = ghash_update({ 0, 0, 0, 0 }, h, aad)
    y = ghash_update(y, h, ctext)
    local lens = "\0\0\0\0" .. be32(#aad * 8) .. "\0\0\0\0" .. be32(#ctext * 8)
    y = ghash_update(y, h, lens)
    local e0 = aes_block(w, bytes_of(iv .. be32(1), 1))
    local t = words(e0)
    local calc = be32(bxor(t[1], y[1])) .. be32(bxor(t[2], y[2])) .. be32(bxor(t[3], y[3]))
        .. be32(bxor(t[4], y[4]))
    if calc ~= tag then
        return nil
    end
    return table.concat(out)
end

local function dbl(b)  -- CMAC subkey doubling of a 16-byte table
    local out, carry = {}, 0
    for i = 16, 1, -1 do
        local v = lshift(b[i], 1) + carry
        out[i] = band(v, 0xff)
        carry = rshift(v, 8)
    end
    if band(b[1], 0x80) ~= 0 then
        out[16] = bxor(out[16], 0x87)
    end
    return out
end

local function cmac(w, msg)
    local k1 = dbl(aes_block(w, bytes_of("", 1)))
    local k2 = dbl(k1)
    local n = math.max(1, math.ceil(#msg / 16))
    local full = #msg > 0 and #msg % 16 == 0
    local x = bytes_of("", 1)
    for i = 1, n do
        local blk = { msg:byte(16 * (i - 1) + 1, math.min(16 * i, #msg)) }
        if i == n then
            local k = full and k1 or k2
            if not full then
                blk[#blk + 1] = 0x80
                for j = #blk + 1, 16 do
                    blk[j] = 0
                end
            end
            for j = 1, 16 do
                blk[j] = bxor(blk[j], k[j])
            end
        end
        for j = 1, 16 do
            x[j] = bxor(x[j], blk[j])
        end
        x = aes_block(w, x)
    end
    return str_of(x, 16)
end

local schedules, nschedules = {}, 0
local function schedule(key)
    local w = schedules[key]
    if not w then
        if nschedules > 512 then
            schedules, nschedules = {}, 0
        end
        w = aes_expand(key)
        schedules[key] = w
        nschedules = nschedules + 1
    end
    return w
end

-- SP 800-108 counter mode, AES-CMAC PRF: [i]_8 || label || 0x00 || context || [L]_32
local kdf_cache = {}
local function kdf(key, label, context, length)
    local ck = key .. label .. "|" .. context .. length
    local hit = kdf_cache[ck]
    if hit then
        return hit
    end
    local w = schedule(key)
    local fixed = label .. "\0" .. context .. be32(length * 8)
    local out = {}
    for i = 1, math.ceil(length / 16) do
        out[i] = cmac(w, string.char(i) .. fixed)
    end
    local r = table.concat(out):sub(1, length)
    kdf_cache[ck] = r
    return r
end

local function hexstr(s)
    return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
    return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

-- FIPS-197 C.3 and GCM test case 16 (McGrew and Viega): run once before the first use
local crypto_ok
local function crypto_selftest()
    if crypto_ok == nil then
        local w = schedule(unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"))
        local ct = str_of(aes_block(w, bytes_of(unhex("00112233445566778899aabbccddeeff"), 1)))
        local w2 = schedule(unhex(string.rep("feffe9928665731c6d6a8f9467308308", 2)))
        local pt = gcm_open(w2, unhex("cafebabefacedbaddecaf888"),
            unhex("feedfacedeadbeeffeedfacedeadbeefabaddad2"),
            unhex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                .. "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"),
            unhex("76fc6ece0f4e1768cddf8853bb2d551b"))
        crypto_ok = hexstr(ct) == "8ea2b7ca516745bfeafc49904b496089" and pt ~= nil and
            hexstr(pt):sub(1, 16) == "d9313225f88406e5"
        if not crypto_ok then
            report_failure("uet.lua: the AES-GCM self-test failed: TSS decryption is off")
        end
    end
    return crypto_ok
end

-- the key file (preference uet.tss_keys), read again when the preference changes
local tss_keys, tss_keys_path = {}, nil
local function load_keys()
    local path = uet.prefs.tss_keys or ""
    if path == tss_keys_path then
        return tss_keys
    end
    tss_keys_path, tss_keys = path, {}
    if path == "" then
        return tss_keys
    end
    local f = io.open(path, "r")
    if not f then
        report_failure("uet.lua: cannot read the TSS key file " .. path)
        return tss_keys
    end
    for line in f:lines() do
        line = line:gsub("#.*", "")
        local sdi, mode, key, rest = line:match("^%s*(%d+)%s+(%a+)%s+(%x+)%s*(.-)%s*$")
        if sdi and (#key == 64 or #key == 88) then
            local e = { mode = mode, key = unhex(key), role = "member", gens = 2, rekey = 0 }
            for k, v in rest:gmatch("([%w_]+)=(%S+)") do
                if k == "role" then
                    e.role = v
                elseif k == "generations" then
                    e.gens = tonumber(v) or 2
                elseif k == "rekey_mask" then
                    e.rekey = tonumber(v) or 0
                end
            end
            tss_keys[tonumber(sdi)] = e
        end
    end
    f:close()
    return tss_keys
end

local function trailing_zeros(m)
    local n = 0
    while m ~= 0 and band(m, 1) == 0 do
        m, n = rshift(m, 1), n + 1
    end
    return n
end

local function xor_str(a, b)
    local out = {}
    for i = 1, #a do
        out[i] = string.char(bxor(a:byte(i), b:byte(i)))
    end
    return table.concat(out)
end

local client_ssi = {}  -- server mode: a client's address -> its SSI (from its own frames)

-- authenticate and decrypt the frame whose TSS header ctx.tss describes; the plaintext
-- (PDS header onwards) or nil and why
local function tss_open(ctx, e, stop)
    local h = ctx.tss
    if not crypto_selftest() then
        return nil, "the AES self-test failed"
    end
    local src, dst, v6 = ip_addresses()
    if not src then
        return nil, "no IP addresses"
    end
    local tvb = ctx.tvb
    local four
    if ctx.native then
        four = tvb:raw(0, 4)
    else
        local sport = ctx.pinfo.src_port
        four = string.char(math.floor(sport / 256) % 256, sport % 256) .. "\0\0"
    end
    local body_at = h.start + h.hl
    if stop - 16 < body_at then
        return nil, "too short for the ICV"
    end
    local aad = src .. dst .. four .. h.raw
    local body = tvb:raw(body_at, stop - 16 - body_at)
    local tag = tvb:raw(stop - 16, 16)
    local epoch2 = string.char(math.floor(h.epoch / 256), h.epoch % 256)
    local tsc6 = string.char(math.floor(h.tsc_hi / 256), h.tsc_hi % 256) .. be32(h.tsc_lo)
    local ssi4 = be32(h.ssi)
    local ident_iv = h.sp and ssi4 or (v6 and be32(h.sdi) or src)
    local rekey = 0
    if e.mode == "cluster" and e.rekey ~= 0 then
        rekey = rshift(band(h.tsc_lo, e.rekey), trailing_zeros(e.rekey))
    end
    local function context(ident, rk)
        if #ident == 16 then
            return "\0\0\0\0" .. epoch2 .. be32(rk) .. ident
        end
        return epoch2 .. be32(rk) .. ident
    end
    local idents
    if e.mode == "cluster" then
        idents = { v6 and src or (h.sp and ssi4 or src) }
    elseif e.mode == "server" then
        local cdst = (not v6 and client_ssi[dst]) and be32(client_ssi[dst]) or dst
        idents = { v6 and src or (h.sp and ssi4 or src), cdst }
    else
        idents = { "" }
    end
    for gen = h.an, math.max(e.gens - 1, h.an), 2 do
        local base = e.key
        if gen > 0 then
            base = kdf(e.key, "UG", "\0\0\0\0" .. be32(gen), 32)
        end
        for i, ident in ipairs(idents) do
            local key, mask = base, nil
            if #base == 44 then
                key, mask = base:sub(1, 32), base:sub(33, 44)
            elseif e.mode == "cluster" then
                local d = kdf(base, "U1", context(ident, rekey), 44)
                key, mask = d:sub(1, 32), d:sub(33, 44)
            elseif e.mode == "server" then
                local d = kdf(base, "U2", context(ident, 0), 44)
                key, mask = d:sub(1, 32), d:sub(33, 44)
            end
            local iv = ident_iv .. epoch2 .. tsc6
            if mask then
                iv = xor_str(iv, mask)
            end
            local pt = gcm_open(schedule(key), iv, aad, body, tag)
            if pt then
                if e.mode == "server" and i == 1 and h.sp and not v6 then
                    client_ssi[src] = h.ssi
                end
                return pt
            end
        end
    end
    return nil, "the ICV does not verify (wrong key, or the frame was changed)"
end

-------------------------------------------------------------------------------- PDS

local function add_flags(pt, tvb, o, ptype, flags)
    local fi = pt:add(F["uet.pds.flags"], tvb(o, 2))
    local b = tvb(o + 1, 1)
    local names = {}
    local function flag(name, mask, label)
        fi:add(F[name], b)
        if band(flags, mask) ~= 0 then
            names[#names + 1] = label
        end
    end
    if ptype == 2 or ptype == 3 or ptype == 13 or ptype == 14 then
        flag("uet.pds.flags.retx", 0x10, "RETX")
        flag("uet.pds.flags.ar", 0x08, "AR")
        flag("uet.pds.flags.syn", 0x04, "SYN")
        fi:add(F["uet.pds.flags.rsvd_rud_rod"], b)
        reserved(fi, "the PDS flags", band(flags, 0x63))
    elseif ptype == 4 or ptype == 5 then
        flag("uet.pds.flags.m", 0x20, "M")
        flag("uet.pds.flags.retx", 0x10, "RETX")
        fi:add(F["uet.pds.flags.rsvd_rudi"], tvb(o, 2))
        reserved(fi, "the PDS flags", band(flags, 0x4f))
    elseif ptype == 6 then
        -- receivers ignore the UUD flag bits (reference 2.9): no expert info
        fi:add(F["uet.pds.flags.rsvd_uud"], tvb(o, 2))
    elseif ptype == 7 or ptype == 8 or ptype == 9 then
        flag("uet.pds.flags.m", 0x20, "M")
        flag("uet.pds.flags.retx", 0x10, "RETX")
        flag("uet.pds.flags.p", 0x08, "P")
        fi:add(F["uet.pds.flags.req"], b)
        local req = band(rshift(flags, 1), 3)
        if req ~= 0 then
            names[#names + 1] = "REQ=" .. (req == 1 and "CLEAR" or req == 2 and "CLOSE" or "3")
        end
        local rmask = 0x41
        if ptype == 7 then
            flag("uet.pds.flags.epsn", 0x40, "EPSN")
            rmask = 0x01
        end
        fi:add(F["uet.pds.flags.rsvd_ack"], b, band(flags, rmask))
        reserved(fi, "the PDS flags", band(flags, rmask))
    elseif ptype == 10 or ptype == 12 then
        flag("uet.pds.flags.m", 0x20, "M")
        flag("uet.pds.flags.retx", 0x10, "RETX")
        flag("uet.pds.flags.nt", 0x08, "NT")
        fi:add(F["uet.pds.flags.rsvd_nack"], b)
        reserved(fi, "the PDS flags", band(flags, 0x47))
    elseif ptype == 11 then
        flag("uet.pds.flags.isrod", 0x20, "ROD")
        flag("uet.pds.flags.retx", 0x10, "RETX")
        flag("uet.pds.flags.ar", 0x08, "AR")
        flag("uet.pds.flags.syn", 0x04, "SYN")
        fi:add(F["uet.pds.flags.rsvd_ctl"], b, band(flags, 0x43))
        reserved(fi, "the PDS flags", band(flags, 0x43))
    end
    if #names > 0 then
        fi:append_text(" (" .. table.concat(names, ", ") .. ")")
        return "[" .. table.concat(names, ",") .. "]"
    end
    return nil
end

-- bytes 10-11 of requests and CPs: DPDCID, or with SYN the PDC info + PSN offset
local function add_dpdcid_or_syn(pt, tvb, o, syn, psn, info)
    if syn then
        local mi = pt:add(F["uet.pds.pdc_mode"], tvb(o + 10, 1))
        mi:add(F["uet.pds.pdc_mode_use_rsv"], tvb(o + 10, 1))
        mi:add(F["uet.pds.pdc_mode_rsv"], tvb(o + 10, 1))
        reserved(mi, "the PDC info", band(tvb(o + 10, 1):uint(), 0x70))
        pt:add(F["uet.pds.psn_offset"], tvb(o + 10, 2))
        local poff = band(tvb(o + 10, 2):uint(), 0x0fff)
        local start = psn_add(psn, -poff)
        pt:add(F["uet.pds.start_psn"], tvb(o + 10, 2), start):set_generated()
        info[#info + 1] = string.format("start=%d", start)
        return nil
    end
    pt:add(F["uet.pds.dpdcid"], tvb(o + 10, 2))
    return tvb(o + 10, 2):uint()
end

local function dissect_sack(ext, tvb, eo, cack, info)
    local so_raw = tvb(eo + 2, 2):uint()
    local so = tvb(eo + 2, 2):int()
    ext:add(F["uet.pds.ack.sack_offset"], tvb(eo + 2, 2)):append_text(string.format(" (%+d)", so))
    local sbase = psn_add(cack, so)
    ext:add(F["uet.pds.sack_base"], tvb(eo + 2, 2), sbase):set_generated()
    ext:add(F["uet.pds.ack.sack_bitmap"], tvb(eo + 4, 8))
    local hi, lo = tvb(eo + 4, 4):uint(), tvb(eo + 8, 4):uint()
    local psns = {}
    for i = 0, 63 do
        local word, b = lo, i
        if i >= 32 then
            word, b = hi, i - 32
        end
        if band(rshift(word, b), 1) ~= 0 then
            psns[#psns + 1] = psn_add(sbase, i)
        end
    end
    local li = ext:add(tvb(eo + 4, 8), string.format("SACKed PSNs (%d)", #psns))
    li:set_generated()
    for _, p in ipairs(psns) do
        li:add(F["uet.pds.sack_psn"], tvb(eo + 4, 8), p):set_generated()
    end
    if #psns > 0 then
        info[#info + 1] = string.format("SACK base=%d n=%d", sbase, #psns)
    end
    return so_raw
end

local function dissect_cc_state(ext, tvb, so, cc_type)
    local ci = ext:add(F["uet.pds.ack.cc_state"], tvb(so, 8))
    if cc_type == 0 then
        ci:set_text("CC State: NSCC")
        ci:add(F["uet.pds.ack.cc_state.service_time"], tvb(so, 2))
        ci:add(F["uet.pds.ack.cc_state.rc"], tvb(so + 2, 1))
        ci:add(F["uet.pds.ack.cc_state.rcv_cwnd_pend"], tvb(so + 2, 1))
        ci:add(F["uet.pds.ack.cc_state.rcvd_bytes"], tvb(so + 3, 3))
        ci:add(F["uet.pds.ack.cc_state.ooo_count"], tvb(so + 6, 2))
    elseif cc_type == 1 then
        ci:set_text("CC State: Credit")
        ci:add(F["uet.pds.ack.cc_state.credit"], tvb(so, 3))
        ci:add(F["uet.pds.ack.cc_state.reserved"], tvb(so + 3, 3))
        reserved(ci, "the credit CC state", tvb(so + 3, 3):uint())
        ci:add(F["uet.pds.ack.cc_state.ooo_count"], tvb(so + 6, 2))
    else
        ci:set_text(string.format("CC State: unknown CC type %d", cc_type))
    end
end

-- Returns the offset after the PDS header and the next header, or nil when the SES
-- header cannot be located.
local function dissect_pds(ctx, o, stop)
    local tvb, root, info = ctx.tvb, ctx.root, ctx.info
    local avail = stop - o
    if avail < 2 then
        root:add_proto_expert_info(E.pds_len,
            string.format("PDS header must be at least 4 bytes (%d available)", avail))
        return nil
    end
    local w = tvb(o, 2):uint()
    local ptype, nh, flags = rshift(w, 11), band(rshift(w, 7), 0xf), band(w, 0x7f)
    local hl = PDS_LEN[ptype]
    if ptype == 7 and band(flags, 0x40) ~= 0 then
        hl = 16
    end
    local tname = name_of(PDS_TYPE, ptype)
    local pt = root:add(F["uet.pds"], tvb(o, math.min(hl or 2, avail)))
    pt:set_text("PDS: " .. tname)
    pt:add(F["uet.pds.type"], tvb(o, 2))
    ctx.pds_type = ptype
    info[#info + 1] = tname
    if not hl then
        pt:add(F["uet.pds.nh"], tvb(o, 2))
        pt:add_proto_expert_info(E.pds_type, string.format("Unknown PDS type %d", ptype))
        return nil
    end
    if ptype == 11 then
        pt:add(F["uet.pds.ctl_type"], tvb(o, 2))
        info[#info] = "CP " .. name_of(CTL_TYPE, nh)
        pt:append_text(" " .. name_of(CTL_TYPE, nh))
    else
        pt:add(F["uet.pds.nh"], tvb(o, 2))
    end
    local flag_text = add_flags(pt, tvb, o, ptype, flags)
    if avail < hl then
        local e, what = E.pds_len, "PDS " .. tname
        if ptype == 2 or ptype == 3 or ptype == 13 or ptype == 14 then
            e, what = E.req_len, (ptype >= 13) and "PDS RUD/ROD CC" or "PDS RUD/ROD"
        elseif ptype == 8 or ptype == 9 then
            e = E.ack_len
        end
        pt:add_proto_expert_info(e, string.format("%s header must be at least %d bytes (%d available)",
            what, hl, avail))
        return nil
    end

    local spdcid, dpdcid
    if ptype == 2 or ptype == 3 or ptype == 13 or ptype == 14 then
        local cpo = tvb(o + 2, 2):int()
        local psn = tvb(o + 4, 4):uint()
        pt:add(F["uet.pds.clear_psn"], tvb(o + 2, 2), psn_add(psn, cpo))
            :append_text(string.format(" (%+d)", cpo))
        pt:add(F["uet.pds.clear_psn_offset"], tvb(o + 2, 2))
        pt:add(F["uet.pds.psn"], tvb(o + 4, 4))
        pt:add(F["uet.pds.spdcid"], tvb(o + 8, 2))
        spdcid = tvb(o + 8, 2):uint()
        info[#info + 1] = string.format("PSN=%d", psn)
        local syn = band(flags, 0x04) ~= 0
        dpdcid = add_dpdcid_or_syn(pt, tvb, o, syn, psn, info)
        info[#info + 1] = string.format("%d>%s", spdcid, dpdcid and tostring(dpdcid) or "SYN")
        if ptype >= 13 then
            pt:add(F["uet.pds.cc_state.ccc_id"], tvb(o + 12, 1))
            pt:add(F["uet.pds.cc_state.credit_target"], tvb(o + 13, 3))
        end
    elseif ptype == 4 or ptype == 5 then
        pt:add(F["uet.pds.rudi.rsvd"], tvb(o + 2, 2))
        reserved(pt, "the RUDI header", tvb(o + 2, 2):uint())
        pt:add(F["uet.pds.rudi.pkt_id"], tvb(o + 4, 4))
        info[#info + 1] = string.format("pkt_id=%d", tvb(o + 4, 4):uint())
    elseif ptype == 6 then
        pt:add(F["uet.pds.uud.rsvd"], tvb(o + 2, 2))  -- ignored by receivers
    elseif ptype == 7 or ptype == 8 or ptype == 9 then
        local cack = tvb(o + 4, 4):uint()
        local apo = tvb(o + 2, 2):int()
        local ack_psn = psn_add(cack, apo)
        local ack_text = string.format("ACK_PSN=%d", ack_psn)
        local ai = pt:add(F["uet.pds.ack_psn"], tvb(o + 2, 2), ack_psn)
        ai:append_text(string.format(" (%+d)", apo))
        pt:add(F["uet.pds.ack_psn_offset"], tvb(o + 2, 2))
        if band(flags, 0x08) ~= 0 then
            -- probe ACK (P): bytes 2-3 echo the probe's opaque value; the ACK PSN computed
            -- from them (shown, as Wireshark does) is not meaningful
            ai:append_text(" [probe: not meaningful]")
            pt:add(F["uet.pds.ack.probe_opaque"], tvb(o + 2, 2))
            ack_text = string.format("probe=0x%04x", tvb(o + 2, 2):uint())
        end
        pt:add(F["uet.pds.cack_psn"], tvb(o + 4, 4))
        pt:add(F["uet.pds.spdcid"], tvb(o + 8, 2))
        pt:add(F["uet.pds.dpdcid"], tvb(o + 10, 2))
        spdcid, dpdcid = tvb(o + 8, 2):uint(), tvb(o + 10, 2):uint()
        info[#info + 1] = string.format("CACK=%d %s %d>%d", cack, ack_text, spdcid, dpdcid)
        if ptype == 7 and hl == 16 then
            pt:add(F["uet.pds.ack.epsn"], tvb(o + 12, 4))
        end
        if ptype == 8 or ptype == 9 then
            local eo = o + 12
            local ext = pt:add(F["uet.pds.ack.prlg"], tvb(eo, hl - 12))
            ext:set_text(ptype == 8 and "ACK CC Extension Header" or "ACK CCX Extension Header")
            local cc_type = rshift(tvb(eo, 1):uint(), 4)
            ext:add(F["uet.pds.ack.cc_type"], tvb(eo, 1))
            ext:add(F["uet.pds.ack.cc_flags"], tvb(eo, 1))
            ext:add(F["uet.pds.ack.mpr"], tvb(eo + 1, 1))
            dissect_sack(ext, tvb, eo, cack, info)
            dissect_cc_state(ext, tvb, eo + 12, cc_type)
            if ptype == 9 then
                ext:add(F["uet.pds.ack.ccx_state"], tvb(eo + 20, 8))
            end
        end
    elseif ptype == 10 or ptype == 12 then
        local code = tvb(o + 2, 1):uint()
        local ci = pt:add(F["uet.pds.nack.code"], tvb(o + 2, 1))
        if not NACK_CODE[code] or code == 0x00 or code == 0x0C then
            ci:add_proto_expert_info(E.nack_code, string.format("Reserved NACK code 0x%02x", code))
        end
        pt:add(F["uet.pds.nack.vendor_code"], tvb(o + 3, 1))
        local nt = band(flags, 0x08) ~= 0
        local pi = pt:add(F["uet.pds.nack.psn"], tvb(o + 4, 4))
        if nt then
            pi:append_text(" (RUDI packet ID)")
        end
        pt:add(F["uet.pds.spdcid"], tvb(o + 8, 2))
        pt:add(F["uet.pds.dpdcid"], tvb(o + 10, 2))
        pt:add(F["uet.pds.nack.max_recv_psn_plus_1"], tvb(o + 12, 4))
        info[#info] = "NACK " .. name_of(NACK_CODE, code)
        if ptype == 12 then
            info[#info] = "NACK_CCX " .. name_of(NACK_CODE, code)
            pt:add(F["uet.pds.nack.nccx_type"], tvb(o + 16, 1))
            pt:add(F["uet.pds.nack.nccx_state1"], tvb(o + 16, 8),
                tvb(o + 16, 8):uint64():band(UInt64(0xffffffff, 0x0fffffff)))
            pt:add(F["uet.pds.nack.nccx_state2"], tvb(o + 24, 8))
        end
        info[#info + 1] = string.format("%s=%d", nt and "pkt_id" or "PSN", tvb(o + 4, 4):uint())
        if not nt then
            spdcid, dpdcid = tvb(o + 8, 2):uint(), tvb(o + 10, 2):uint()
            info[#info + 1] = string.format("%d>%d", spdcid, dpdcid)
        end
    elseif ptype == 11 then
        if not CTL_TYPE[nh] then
            pt:add_proto_expert_info(E.ctl_unknown, string.format("Unknown control packet type %d", nh))
        end
        pt:add(F["uet.pds.ctrl_probe_opaque"], tvb(o + 2, 2))
        local psn = tvb(o + 4, 4):uint()
        pt:add(F["uet.pds.psn"], tvb(o + 4, 4))
        pt:add(F["uet.pds.spdcid"], tvb(o + 8, 2))
        spdcid = tvb(o + 8, 2):uint()
        info[#info + 1] = string.format("PSN=%d", psn)
        local syn = band(flags, 0x04) ~= 0
        dpdcid = add_dpdcid_or_syn(pt, tvb, o, syn, psn, info)
        info[#info + 1] = string.format("%d>%s", spdcid, dpdcid and tostring(dpdcid) or "SYN")
        pt:add(F["uet.pds.ctrl_payload"], tvb(o + 12, 4))
            :append_text(" (" .. (CTL_PAYLOAD[nh] or "unknown") .. ")")
        info[#info + 1] = string.format("payload=0x%x", tvb(o + 12, 4):uint())
    end
    if flag_text then
        info[#info + 1] = flag_text
    end
    if spdcid then
        -- every PDC packet (RUDI NACKs with NT set leave spdcid unset); a SYN carries no
        -- DPDCID, but it is sent by the initiator, whose SPDCID keys the PDC
        track_pdc(ctx, ptype, nh, spdcid, dpdcid or -1)
    end

    local after = o + hl
    if ptype == 11 then
        return after, 0
    end
    if nh > 6 then
        pt:add_proto_expert_info(E.nh_unknown, string.format("Unknown next header %d", nh))
        return nil
    end
    if not ALLOWED_NH[ptype][nh] then
        pt:add_proto_expert_info(E.nh_mismatch, string.format(
            "Next header %s is not allowed after %s", name_of(NEXT_HDR, nh), tname))
    end
    return after, nh
end

-------------------------------------------------------------------------------- SES

local function ses_short(ctx, item, what, need, avail)
    item:add_proto_expert_info(E.ses_len,
        string.format("%s must be at least %d bytes (%d available)", what, need, avail))
end

local function dissect_atomic_ext(ctx, st, o, stop)
    local tvb = ctx.tvb
    local avail = stop - o
    if avail < 4 then
        ses_short(ctx, st, "SES Atomic Ext hdr", 4, avail)
        return nil
    end
    local aop = tvb(o, 1):uint()
    local cas = CAS_AOPS[aop]
    local pfx = cas and "uet.ses.comp_swap_ext_hdr" or "uet.ses.atomic_op_ext_hdr"
    local hl = cas and 36 or 4
    if avail < hl then
        ses_short(ctx, st, "SES Compare and Swap Ext hdr", hl, avail)
        return nil
    end
    local ei = st:add(F[pfx], tvb(o, hl))
    ei:set_text((cas and "Compare and Swap Operation Atomic Header: " or
        "Atomic Operation Extension Header: ") .. name_of(ATOMIC_OPCODE, aop))
    ei:add(F[pfx .. ".atomic_opcode"], tvb(o, 1))
    ei:add(F[pfx .. ".atomic_data_type"], tvb(o + 1, 1))
    ei:add(F[pfx .. ".sem_ctl"], tvb(o + 2, 1))
    ei:add(F[pfx .. ".rsvd"], tvb(o + 3, 1))
    reserved(ei, "the atomic semantic control", band(tvb(o + 2, 1):uint(), 0xfc))
    reserved(ei, "the atomic extension header", tvb(o + 3, 1):uint())
    if cas then
        ei:add(F[pfx .. ".comp_value"], tvb(o + 4, 16))
        ei:add(F[pfx .. ".swap_value"], tvb(o + 20, 16))
    end
    ctx.info[#ctx.info + 1] = name_of(ATOMIC_OPCODE, aop)
    return o + hl
end

local function dissect_rndv_ext(ctx, st, o, stop)
    local tvb = ctx.tvb
    local avail = stop - o
    if avail < 24 then
        ses_short(ctx, st, "SES Rendezvous Ext hdr", 24, avail)
        return nil
    end
    local ei = st:add(F["uet.ses.rendv_ext_hdr"], tvb(o, 24))
    ei:set_text("Rendezvous Extension Header")
    ei:add(F["uet.ses.rendv_ext_hdr.eager_length"], tvb(o, 4))
    ei:add(F["uet.ses.rendv_ext_hdr.read_ri_generation"], tvb(o + 4, 1))
    ei:add(F["uet.ses.rendv_ext_hdr.read_pid_on_fep"], tvb(o + 4, 4))
    ei:add(F["uet.ses.rendv_ext_hdr.read_resource_index"], tvb(o + 6, 2))
    ei:add(F["uet.ses.rendv_ext_hdr.read_offset"], tvb(o + 8, 8))
    ei:add(F["uet.ses.rendv_ext_hdr.read_match_bits"], tvb(o + 16, 8))
    return o + 24
end

-- common bytes 0-11 of the three request headers; kind = "std" | "small_req" | "med_req"
local function request_common(ctx, st, o, kind)
    local tvb = ctx.tvb
    local b0, fl = tvb(o, 1):uint(), tvb(o + 1, 1):uint()
    local opcode = band(b0, 0x3f)
    local P = "uet.ses." .. kind
    st:add(F[P .. ".rsv"], tvb(o, 1))
    st:add(F["uet.ses.std.opcode"], tvb(o, 1))  -- Wireshark uses the std field for all three
    reserved(st, "SES byte 0", band(b0, 0xc0))
    if not SES_OPCODE[opcode] then
        st:add_proto_expert_info(E.ses_opcode, string.format("Unknown SES request opcode 0x%02x", opcode))
    end
    local fi = st:add(F[P .. ".flags"], tvb(o + 1, 1))
    local fb = tvb(o + 1, 1)
    local fp = (kind == "std") and P .. "." or P .. ".flags."
    fi:add(F[fp .. "ver"], fb)
    fi:add(F[fp .. "dc"], fb)
    fi:add(F[fp .. "ie"], fb)
    fi:add(F[fp .. "rel"], fb)
    if kind == "std" then
        fi:add(F[P .. ".hd"], fb)
    elseif kind == "med_req" then
        fi:add(F[P .. ".flags.hd"], fb)
    else
        fi:add(F[P .. ".flags.rsvd"], fb)
        reserved(fi, "the small request flags (HD)", band(fl, 0x04))
    end
    fi:add(F[P .. ".eom"], fb)
    fi:add(F[P .. ".som"], fb)
    local names = {}
    for _, pair in ipairs({ { 0x01, "SOM" }, { 0x02, "EOM" }, { 0x04, "HD" }, { 0x08, "REL" },
        { 0x10, "IE" }, { 0x20, "DC" } }) do
        if band(fl, pair[1]) ~= 0 then
            names[#names + 1] = pair[2]
        end
    end
    if #names > 0 then
        fi:append_text(" (" .. table.concat(names, ", ") .. ")")
    end
    if rshift(fl, 6) ~= 0 then
        fi:add_proto_expert_info(E.ses_version, string.format("Unsupported SES version %d", rshift(fl, 6)))
    end
    return opcode, fl
end

local function dissect_ses_request(ctx, o, stop, nh)
    local tvb, root, info = ctx.tvb, ctx.root, ctx.info
    local hl = SES_LEN[nh]
    local avail = stop - o
    local kind = (nh == 3) and "std" or (nh == 2) and "med_req" or "small_req"
    local what = (nh == 3) and "SES STD header" or (nh == 2) and "SES Medium Req header"
        or "SES SMALL Req header"
    local st = root:add(F["uet.ses"], tvb(o, math.min(hl, math.max(avail, 0))))
    st:set_text("SES: " .. name_of(NEXT_HDR, nh))
    if avail < hl then
        ses_short(ctx, st, what, hl, avail)
        return nil
    end
    local opcode, fl = request_common(ctx, st, o, kind)
    local oname = name_of(SES_OPCODE, opcode)
    st:append_text(", " .. oname)
    info[#info + 1] = "| " .. oname
    local som = band(fl, 0x01) ~= 0
    local P = "uet.ses." .. kind
    if kind == "std" then
        st:add(F["uet.ses.std.message_id"], tvb(o + 2, 2))
        st:add(F["uet.ses.std.index_generation"], tvb(o + 4, 1))
        info[#info + 1] = string.format("msg=%d", tvb(o + 2, 2):uint())
    else
        st:add(F[P .. ".flags.rsv2"], tvb(o + 2, 2))
        st:add(F[P .. ".req_length"], tvb(o + 2, 2))
        reserved(st, "the request length word", band(tvb(o + 2, 2):uint(), 0xc000))
        st:add(F[P .. (kind == "med_req" and ".resource_index_generation" or ".index_generation")],
            tvb(o + 4, 1))
        info[#info + 1] = string.format("len=%d", band(tvb(o + 2, 2):uint(), 0x3fff))
    end
    st:add(F[P .. ".job_id"], tvb(o + 5, 3))
    local r2 = (kind == "std") and ".reserved2" or ".rsv3"
    local r3 = (kind == "std") and ".reserved3" or ".rsv4"
    st:add(F[P .. r2], tvb(o + 8, 2))
    st:add(F[P .. ".pidonfep"], tvb(o + 8, 2))
    st:add(F[P .. r3], tvb(o + 10, 2))
    st:add(F[P .. ".resource_index"], tvb(o + 10, 2))
    reserved(st, "the PIDonFEP word", band(tvb(o + 8, 2):uint(), 0xf000))
    reserved(st, "the resource index word", band(tvb(o + 10, 2):uint(), 0xf000))
    if kind == "std" then
        if opcode == 0x08 or opcode == 0x0B then
            st:add(F["uet.ses.std.restart_token"], tvb(o + 12, 8))
        else
            st:add(F["uet.ses.std.buffer_offset"], tvb(o + 12, 8))
        end
        st:add(F["uet.ses.std.initiator"], tvb(o + 20, 4))
        if opcode == 0x0C then
            st:add(F["uet.ses.std.restart_token"], tvb(o + 24, 8))
        else
            st:add(F["uet.ses.std.mem_key_match_bits"], tvb(o + 24, 8))
        end
        if som then
            st:add(F["uet.ses.std.header_data"], tvb(o + 32, 8))
        else
            st:add(F["uet.ses.std.reserved4"], tvb(o + 32, 4))
            st:add(F["uet.ses.std.payload_length"], tvb(o + 32, 4))
            st:add(F["uet.ses.std.message_offset"], tvb(o + 36, 4))
            reserved(st, "the payload length word", band(tvb(o + 32, 4):uint(), 0xffffc000))
            ctx.payload_length = band(tvb(o + 34, 2):uint(), 0x3fff)
            info[#info + 1] = string.format("off=%d", tvb(o + 36, 4):uint())
        end
        st:add(F["uet.ses.std.request_length"], tvb(o + 40, 4))
    elseif kind == "med_req" then
        if band(fl, 0x04) ~= 0 then
            st:add(F["uet.ses.med_req.header_data"], tvb(o + 12, 8))
        else
            st:add(F["uet.ses.med_req.buffer_offset"], tvb(o + 12, 8))
        end
        st:add(F["uet.ses.med_req.initiator"], tvb(o + 20, 4))
        st:add(F["uet.ses.med_req.mem_key_match_bits"], tvb(o + 24, 8))
    else
        st:add(F["uet.ses.small_req.buffer_offset"], tvb(o + 12, 8))
    end
    if kind ~= "std" and band(fl, 0x03) ~= 0x03 then
        st:add_proto_expert_info(E.ses_mismatch,
            string.format("%s is single-packet: SOM and EOM must both be set", what))
    end
    local names = {}
    if som then names[#names + 1] = "SOM" end
    if band(fl, 0x02) ~= 0 then names[#names + 1] = "EOM" end
    if #names > 0 and kind == "std" then
        info[#info + 1] = table.concat(names, ",")
    end
    local p = o + hl
    if ATOMIC_OPS[opcode] then
        p = dissect_atomic_ext(ctx, st, p, stop)
    elseif RNDV_OPS[opcode] then
        if kind == "std" then
            p = dissect_rndv_ext(ctx, st, p, stop)
        else
            st:add_proto_expert_info(E.ses_mismatch, string.format(
                "%s carries no rendezvous extension: use the standard header", oname))
        end
    end
    if p then
        st:set_len(p - o)
    end
    return p
end

local RSP_RULE = {
    [4] = { set(0, 1, 3), "Invalid opcode %d for ses resp, expected 0 or 1 or 3" },
    [5] = { set(2), "Invalid opcode %d for ses resp data, expected 2" },
    [6] = { set(2), "Invalid opcode %d for ses resp data small, expected 2" },
}

local function dissect_ses_response(ctx, o, stop, nh)
    local tvb, root, info = ctx.tvb, ctx.root, ctx.info
    local hl = SES_LEN[nh]
    local avail = stop - o
    local st = root:add(F["uet.ses"], tvb(o, math.min(hl, math.max(avail, 0))))
    st:set_text("SES: " .. name_of(NEXT_HDR, nh))
    if avail < hl then
        ses_short(ctx, st, (nh == 4) and "SES Response header" or (nh == 5) and
            "SES Response Data header" or "SES Response Data Small header", hl, avail)
        return nil
    end
    local opcode = band(tvb(o, 1):uint(), 0x3f)
    local rc = band(tvb(o + 1, 1):uint(), 0x3f)
    st:add(F["uet.ses.rsp.list"], tvb(o, 1))
    local oi = st:add(F["uet.ses.rsp.opcode"], tvb(o, 1))
    local rule = RSP_RULE[nh]
    if not rule[1][opcode] then
        oi:add_proto_expert_info(E.rsp_opcode, string.format(rule[2], opcode))
    end
    st:add(F["uet.ses.rsp.ver"], tvb(o + 1, 1))
    st:add(F["uet.ses.rsp.return_code"], tvb(o + 1, 1))
    if rshift(tvb(o + 1, 1):uint(), 6) ~= 0 then
        st:add_proto_expert_info(E.ses_version,
            string.format("Unsupported SES version %d", rshift(tvb(o + 1, 1):uint(), 6)))
    end
    st:append_text(", " .. name_of(RSP_OPCODE, opcode) .. " rc=" .. name_of(RETURN_CODE, rc))
    info[#info + 1] = "| " .. name_of(RSP_OPCODE, opcode) .. " rc=" .. name_of(RETURN_CODE, rc)
    if nh == 4 then
        st:add(F["uet.ses.rsp.message_id"], tvb(o + 2, 2))
        st:add(F["uet.ses.rsp.resource_index_gen"], tvb(o + 4, 1))
        st:add(F["uet.ses.rsp.job_id"], tvb(o + 5, 3))
        st:add(F["uet.ses.rsp.mod_length"], tvb(o + 8, 4))
        info[#info + 1] = string.format("msg=%d", tvb(o + 2, 2):uint())
    elseif nh == 5 then
        st:add(F["uet.ses.rsp.message_id"], tvb(o + 2, 2))
        st:add(F["uet.ses.rsp.reserved"], tvb(o + 4, 1))  -- reserved: send 0, ignore
        st:add(F["uet.ses.rsp.job_id"], tvb(o + 5, 3))
        st:add(F["uet.ses.rsp.read_req_message_id"], tvb(o + 8, 2))
        st:add(F["uet.ses.rsp.reserved2"], tvb(o + 10, 2))
        st:add(F["uet.ses.rsp.payload_length"], tvb(o + 10, 2))
        reserved(st, "the payload length word", band(tvb(o + 10, 2):uint(), 0xc000))
        st:add(F["uet.ses.rsp.mod_length"], tvb(o + 12, 4))
        st:add(F["uet.ses.rsp.message_offset"], tvb(o + 16, 4))
        ctx.payload_length = band(tvb(o + 10, 2):uint(), 0x3fff)
        info[#info + 1] = string.format("msg=%d off=%d", tvb(o + 2, 2):uint(), tvb(o + 16, 4):uint())
    else
        st:add(F["uet.ses.rsp.reserved3"], tvb(o + 2, 2))
        st:add(F["uet.ses.rsp.payload_length"], tvb(o + 2, 2))
        reserved(st, "the payload length word", band(tvb(o + 2, 2):uint(), 0xc000))
        st:add(F["uet.ses.rsp.reserved"], tvb(o + 4, 1))
        reserved(st, "the RSP_DATA_SMALL header", tvb(o + 4, 1):uint())
        st:add(F["uet.ses.rsp.job_id"], tvb(o + 5, 3))
        st:add(F["uet.ses.rsp.original_request_psn"], tvb(o + 8, 4))
        ctx.payload_length = band(tvb(o + 2, 2):uint(), 0x3fff)
    end
    return o + hl
end

-------------------------------------------------------------------------------- trailers

local function check_udp_checksum(ctx)
    local tvb, root = ctx.tvb, ctx.root
    local ck, ulen = last(fx.udp_checksum), last(fx.udp_length)
    local sp, dp = last(fx.udp_srcport), last(fx.udp_dstport)
    if not (ck and ulen and sp and dp) then
        return
    end
    local src, dst = ip_addresses()
    if not src then
        return
    end
    local cval = ck.value
    if cval == 0 then
        -- no checksum: legal over IPv4; over IPv6 Wireshark's UDP dissector already flags it
        root:add(F["uet.udp_checksum.status"], 3):set_generated()
        return
    end
    if tvb:len() ~= tvb:reported_len() or ulen.value ~= tvb:reported_len() + 8 then
        root:add(F["uet.udp_checksum.status"], 2):set_generated()
        return
    end
    local acc = sum16(src, 0)
    acc = sum16(dst, acc)
    acc = acc + 17 + ulen.value + sp.value + dp.value + ulen.value
    acc = sum16(tvb:raw(), acc)
    local expect = 0xffff - fold16(acc)
    if expect == 0 then
        expect = 0xffff
    end
    local good = (expect == cval)
    local it = root:add(F["uet.udp_checksum.status"], good and 1 or 0)
    it:set_generated()
    it:add(F["uet.udp_checksum.calculated"], expect):set_generated()
    if not good then
        it:add_proto_expert_info(E.udp_bad,
            string.format("Bad UDP checksum 0x%04x (should be 0x%04x)", cval, expect))
    end
end

-- CRC-32C trailer: covers the IP source and destination addresses and the IP payload up to
-- the CRC (the UDP header with its checksum field taken as zero, or the entropy header).
local function check_crc(ctx, stop)
    local tvb, root = ctx.tvb, ctx.root
    local src, dst = ip_addresses()
    local range = tvb(stop, 4)
    local value = range:uint()
    if uet.prefs.crc_byte_order == 1 then
        value = range:le_uint()
    end
    local it = root:add(F["uet.crc32c"], range, value)
    if not src or tvb:len() ~= tvb:reported_len() then
        it:add(F["uet.crc32c.status"], 2):set_generated()
        return
    end
    local crc = crc32c(src .. dst)
    if not ctx.native then
        local sp, dp, ulen = last(fx.udp_srcport), last(fx.udp_dstport), last(fx.udp_length)
        if not (sp and dp and ulen) then
            it:add(F["uet.crc32c.status"], 2):set_generated()
            return
        end
        local function be16(v)
            return string.char(math.floor(v / 256) % 256, v % 256)
        end
        crc = crc32c(be16(sp.value) .. be16(dp.value) .. be16(ulen.value) .. "\0\0", crc)
    end
    crc = crc32c(tvb:raw(0, stop), crc)
    local good = (crc == value)
    it:add(F["uet.crc32c.calculated"], crc):set_generated()
    it:add(F["uet.crc32c.status"], good and 1 or 0):set_generated()
    if not good then
        it:add_proto_expert_info(E.crc_bad,
            string.format("Bad CRC-32C 0x%08x (should be 0x%08x)", value, crc))
    end
end

-------------------------------------------------------------------------------- main

local data_dissector = Dissector.get("data")

local function dissect_common(tvb, pinfo, tree, native)
    pinfo.cols.protocol = "UET"
    local len = tvb:len()
    local root = tree:add(uet, tvb())
    local ctx = { tvb = tvb, pinfo = pinfo, root = root, info = {}, native = native }
    local o = 0
    if native then
        if len < 4 then
            root:add_proto_expert_info(E.pds_len,
                string.format("Entropy header must be 4 bytes (%d available)", len))
            pinfo.cols.info = "UET (truncated entropy header)"
            return len
        end
        root:add(F["uet.pds.entropy"], tvb(0, 2))
        root:add(F["uet.pds.entropy.rsvd"], tvb(2, 2))
        reserved(root, "the entropy header", tvb(2, 2):uint())
        o = 4
    end
    -- trailer: ICV after TSS, else the optional CRC-32C
    local stop = len
    local tss = (len - o >= 1) and rshift(tvb(o, 1):uint(), 3) == 1
    local trailer
    if tss and uet.prefs.tss_icv then
        trailer = 16
    elseif not tss and uet.prefs.crc_trailer then
        trailer = 4
    end
    if trailer then
        if len - o < trailer then
            root:add_proto_expert_info(E.trailer_short, string.format(
                "Packet too short for a %d-byte trailer (%d bytes)", trailer, len - o))
            trailer = nil
        else
            stop = len - trailer
        end
    end

    local outer = tvb
    if tss then
        o = dissect_tss(ctx, o, stop)
        local e = o and ctx.tss and trailer == 16 and load_keys()[ctx.tss.sdi]
        if e then
            local pt, why = tss_open(ctx, e, len)
            local di = ctx.tss.item:add(F["uet.tss.decrypted"], pt ~= nil)
            di:set_generated()
            if pt then
                tvb = ByteArray.new(hexstr(pt)):tvb("Decrypted UET")
                ctx.tvb, o, stop = tvb, 0, tvb:len()
            else
                di:add_proto_expert_info(E.tss_auth, "TSS authentication failed: " .. why)
                root:add(F["uet.tss.encrypted"], tvb(o, stop - o))
                ctx.info[#ctx.info + 1] = "[AUTH FAILED]"
                o = nil
            end
        elseif o and not uet.prefs.tss_cleartext then
            root:add(F["uet.tss.encrypted"], tvb(o, stop - o))
            ctx.info[#ctx.info + 1] = string.format("encrypted (no key for SDI %d)",
                ctx.tss and ctx.tss.sdi or -1)
            o = nil
        end
    end
    local nh
    if o then
        o, nh = dissect_pds(ctx, o, stop)
    end
    if o and nh and nh ~= 0 then
        if REQ_NH[nh] then
            o = dissect_ses_request(ctx, o, stop, nh)
        else
            o = dissect_ses_response(ctx, o, stop, nh)
        end
    end
    if o then
        local present = stop - o
        root:add(F["uet.payload_len"], present):set_generated()
        if ctx.payload_length and present < ctx.payload_length then
            root:add_proto_expert_info(E.short_payload, string.format(
                "Payload length %d but %d bytes present (trimmed?)", ctx.payload_length, present))
        end
        if present > 0 then
            data_dissector:call(tvb(o, present):tvb(), pinfo, root)
        end
    end
    local dscp = ip_dscp()
    if is_trimmed_dscp(dscp) then
        root:add(F["uet.trimmed"], true):append_text(string.format(" (DSCP %d)", dscp))
        table.insert(ctx.info, 1, "[TRIMMED]")
    end
    if trailer == 16 then
        root:add(F["uet.tss.icv"], outer(len - 16, 16))
    elseif trailer == 4 then
        check_crc(ctx, stop)
    end
    if not native and uet.prefs.check_udp_checksum then
        check_udp_checksum(ctx)
    end
    local text = table.concat(ctx.info, " ")
    if ctx.pdc then
        text = text .. string.format(" pdc=%d", ctx.pdc)
    end
    root:append_text(", " .. text)
    pinfo.cols.info = text
    return len
end

function uet.dissector(tvb, pinfo, tree)
    return dissect_common(tvb, pinfo, tree, false)
end

function uet_ip.dissector(tvb, pinfo, tree)
    return dissect_common(tvb, pinfo, tree, true)
end

-- Wireshark's UDP hands a packet to the dissector of its *lower* port first, so a UET packet
-- whose EV (source port) is a registered port below 4793 (53, 123, ...) would go to that
-- protocol. This heuristic claims every packet to the UET port; with the UDP preference
-- "Try heuristic sub-dissectors first" (udp.try_heuristic_first) it runs before the port
-- tables, so sprayed captures dissect whatever their EVs.
local function heur_udp(tvb, pinfo, tree)
    if pinfo.dst_port ~= uet.prefs.udp_port then
        return false
    end
    dissect_common(tvb, pinfo, tree, false)
    return true
end
uet:register_heuristic("udp", heur_udp)

-------------------------------------------------------------------------------- registration

local cur_port, cur_proto

local function register_handoff()
    local udp = DissectorTable.get("udp.port")
    local ipt = DissectorTable.get("ip.proto")
    if cur_port then
        udp:remove(cur_port, uet)
    end
    if cur_proto and cur_proto ~= 0 then
        ipt:remove(cur_proto, uet_ip)
    end
    cur_port, cur_proto = uet.prefs.udp_port, uet.prefs.ip_proto
    udp:add(cur_port, uet)
    if cur_proto ~= 0 then
        ipt:add(cur_proto, uet_ip)
    end
end

function uet.prefs_changed()
    register_handoff()
end

register_handoff()
DissectorTable.get("udp.port"):add_for_decode_as(uet)
DissectorTable.get("ip.proto"):add_for_decode_as(uet_ip)

-------------------------------------------------------------------------------- diff marks

-- `uet diff A B --write DIFF.pcapng` merges two captures into one file (interfaces A:h0,
-- B:h0, ...) and marks every differing packet with a packet comment in a fixed form
-- (uet/capture/diffcap.py):
--   uet-diff: only in A | A#7
--   uet-diff: uet.pds.flags 0x4 -> 0xc; uet.pds.flags.ar 0 -> 1 | A#5 B#5 frame 10
--   uet-diff: moved to another path (EV 812 -> 3301) | A#7 B#9 frame 15 occurrence 2
-- This postdissector (it runs on every frame, UET or not) turns such a comment into the
-- uet.diff tree, so the marks can be filtered (uet.diff.kind == "only_in_a") and shown as
-- columns. Its protocol is "uet.diff" whatever prefix the dissector above took.

local diff = Proto("uet.diff", "UET capture diff (uet diff --write)")
local DF = {
    kind = ProtoField.string("uet.diff.kind", "Difference"),
    side = ProtoField.string("uet.diff.side", "Side (capture)"),
    a_frame = ProtoField.uint32("uet.diff.a_frame", "Frame in capture A", base.DEC),
    b_frame = ProtoField.uint32("uet.diff.b_frame", "Frame in capture B", base.DEC),
    peer = ProtoField.framenum("uet.diff.peer", "Counterpart in this file"),
    occurrence = ProtoField.uint32("uet.diff.occurrence", "Occurrence of the key", base.DEC),
    ev_a = ProtoField.uint32("uet.diff.ev_a", "EV in A", base.DEC),
    ev_b = ProtoField.uint32("uet.diff.ev_b", "EV in B", base.DEC),
    field = ProtoField.string("uet.diff.field", "Field"),
    value_a = ProtoField.string("uet.diff.value_a", "Value in A"),
    value_b = ProtoField.string("uet.diff.value_b", "Value in B"),
    text = ProtoField.string("uet.diff.comment", "Comment"),
}
diff.fields = { DF.kind, DF.side, DF.a_frame, DF.b_frame, DF.peer, DF.occurrence, DF.ev_a,
                DF.ev_b, DF.field, DF.value_a, DF.value_b, DF.text }

local DIFF_KIND = {
    only_in_a = "only in A", only_in_b = "only in B", changed = "changed",
    moved = "moved to another path",
}
local f_comment = Field.new("frame.comment")
local f_ifname = Field.new("frame.interface_name")

local function diff_changes(text, t)
    for part in (text .. "; "):gmatch("(.-); ") do
        local name, va, vb = part:match("^(%S+) (.-) %-> (.*)$")
        if name then
            local it = t:add(DF.field, name)
            it:append_text(string.format(": %s -> %s", va, vb))
            it:add(DF.value_a, va)
            it:add(DF.value_b, vb)
        end
    end
end

local function diff_mark(text, pinfo, tree)
    local what, refs = text:match("^uet%-diff: (.*) | (.-)$")
    if not what then
        what, refs = text:match("^uet%-diff: (.*)$"), ""
    end
    local kind, changes
    if what == "only in A" then
        kind = "only_in_a"
    elseif what == "only in B" then
        kind = "only_in_b"
    elseif what:sub(1, 21) == "moved to another path" then
        kind = "moved"
        changes = what:match("^moved to another path %b(); (.*)$")
    else
        kind, changes = "changed", what
    end
    local t = tree:add(diff, "UET diff: " .. DIFF_KIND[kind])
    t:add(DF.kind, kind):set_generated()
    local name = f_ifname()
    local side = name and tostring(name.value):match("^([AB]):")
    if side then
        t:add(DF.side, side):set_generated()
    end
    local a, b = refs:match("A#(%d+)"), refs:match("B#(%d+)")
    if a then
        t:add(DF.a_frame, tonumber(a)):set_generated()
    end
    if b then
        t:add(DF.b_frame, tonumber(b)):set_generated()
    end
    local peer = refs:match("frame (%d+)")
    if peer then
        t:add(DF.peer, tonumber(peer)):set_generated()
    end
    local occ = refs:match("occurrence (%d+)")
    if occ then
        t:add(DF.occurrence, tonumber(occ)):set_generated()
    end
    if kind == "moved" then
        local ea, eb = what:match("%(EV (%S+) %-> (%S+)%)")
        if tonumber(ea) then
            t:add(DF.ev_a, tonumber(ea)):set_generated()
        end
        if tonumber(eb) then
            t:add(DF.ev_b, tonumber(eb)):set_generated()
        end
    end
    if changes then
        diff_changes(changes, t)
    end
    t:add(DF.text, text):set_generated()
    pinfo.cols.info:prepend("[" .. DIFF_KIND[kind] .. "] ")
end

function diff.dissector(tvb, pinfo, tree)
    local comments = { f_comment() }
    for _, c in ipairs(comments) do
        local text = tostring(c.value)
        if text:sub(1, 10) == "uet-diff: " then
            diff_mark(text, pinfo, tree)
        end
    end
end
register_postdissector(diff)
