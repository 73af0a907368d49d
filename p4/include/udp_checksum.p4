// The UDP checksum of HINA messages: verified on every request, computed on every reply.
//
// Why: the Ethernet FCS guards a frame only on the wire; a bit flipped after it (a NIC, host
// memory, a faulty switch port) in a seq, slot, pool or lane is otherwise summed as if it were
// real, and every worker of the job gets the wrong result. The UDP checksum covers the
// pseudo-header, the UDP header, the HINA header and the whole payload, end to end: workers
// always send one (v3 makes it mandatory; 0, "no checksum", is BAD_CHECKSUM), the switch drops
// requests whose checksum is wrong, and it writes a correct one into every reply, which the
// workers' kernel (or the frame tunnel, worker/link.py) checks before HINA sees the bytes.
//
// Both directions use hash(csum16) over the same field list rather than v1model's
// verify_checksum/update_checksum: the Internet checksum of UDP sends a computed 0 as 0xFFFF
// (RFC 768), which verify_checksum (computed == field) would take for an error and
// update_checksum would send as 0, "no checksum". Summing the received checksum field with the
// data instead gives 0 for every valid packet, 0xFFFF-for-0 included.
//
// The payload headers (block, harvest, thc, pairs, words) are listed whole: at most two of them are
// valid in any packet, and the fields of invalid headers are left out of the hashed bytes (BMv2
// and the embedded target alike), so one list covers every message layout. The UDP length
// equals the message size (Validate), so no unparsed bytes belong to the datagram.
//
// Tofino: the parser's Checksum extern verifies the same sum over the extracted fields, and the
// deparser's Checksum computes the reply's (docs/dataplane.md).
#ifndef _HINA_UDP_CHECKSUM_P4_
#define _HINA_UDP_CHECKSUM_P4_

#include "headers.p4"

// The pseudo-header, UDP header (with `checksum` for its checksum field) and HINA message.
#define HINA_UDP_CHECKSUM_DATA(checksum) \
    { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length, \
      hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length, checksum, \
      hdr.hina, hdr.block, hdr.harvest, hdr.thc, hdr.pairs, hdr.words }

// Ingress, on a HINA request: BAD_CHECKSUM unless the checksum is present and right.
control VerifyUdpChecksum(in headers_t hdr, inout metadata_t meta) {
    apply {
        bit<16> residue;
        // The checksum of data that includes a right checksum field is 0.
        hash(residue, HashAlgorithm.csum16, 16w0, HINA_UDP_CHECKSUM_DATA(hdr.udp.checksum),
             32w0x10000);
        if (hdr.udp.checksum == UDP_NO_CHECKSUM || residue != 0) {
            meta.reason = REASON_BAD_CHECKSUM;
        }
    }
}

// Egress, on every reply (after its last header change): the UDP checksum of what leaves.
control UpdateUdpChecksum(inout headers_t hdr) {
    apply {
        bit<16> checksum;
        hash(checksum, HashAlgorithm.csum16, 16w0, HINA_UDP_CHECKSUM_DATA(16w0), 32w0x10000);
        // 0 means "no checksum" in UDP: a computed 0 is sent as its other form, 0xFFFF.
        hdr.udp.checksum = (checksum == UDP_NO_CHECKSUM) ? 16w0xFFFF : checksum;
    }
}

#endif  // _HINA_UDP_CHECKSUM_P4_
