/*
 * The Tofino Native Architecture (TNA, Tofino 1) as the embedded target runs it: the subset of
 * Intel's tna.p4 (tofino1_specs.p4, tofino1_base.p4, tofino1_arch.p4 of p4c 2.0.1, Apache-2.0)
 * that HINA's TNA programs use, with the same names, types and field layouts, so that a program
 * written for bf-p4c parses unchanged. Differences from the reference (docs/dataplane.md,
 * "TNA on the embedded target"):
 *   - @optional parameters are left out (their calls pass every argument), but for
 *     RegisterAction.apply's rv, which an initializer may leave out, and
 *     Checksum.update's zeros_as_ones;
 *   - Switch takes one pipeline (the reference takes up to four, @optional);
 *   - externs HINA does not use (Meter, Lpf, Wred, MathUnit, Mirror, Resubmit, Digest, ...)
 *     are not declared: a program using them fails to compile with "not declared".
 */
#ifndef _TOFINO1_NATIVE_ARCHITECTURE_
#define _TOFINO1_NATIVE_ARCHITECTURE_
#include <core.p4>

#ifndef __TARGET_TOFINO__
#define __TARGET_TOFINO__ 1           /* bf-p4c --target tofino defines it */
#endif

#define PORT_ID_WIDTH                  9
typedef bit<PORT_ID_WIDTH>             PortId_t;
#define MULTICAST_GROUP_ID_WIDTH       16
typedef bit<MULTICAST_GROUP_ID_WIDTH>  MulticastGroupId_t;
#define QUEUE_ID_WIDTH                 5
typedef bit<QUEUE_ID_WIDTH>            QueueId_t;
#define MIRROR_TYPE_WIDTH              3
typedef bit<MIRROR_TYPE_WIDTH>         MirrorType_t;
#define MIRROR_ID_WIDTH                10
typedef bit<MIRROR_ID_WIDTH>           MirrorId_t;
#define RESUBMIT_TYPE_WIDTH            3
typedef bit<RESUBMIT_TYPE_WIDTH>       ResubmitType_t;
#define DIGEST_TYPE_WIDTH              3
typedef bit<DIGEST_TYPE_WIDTH>         DigestType_t;
#define REPLICATION_ID_WIDTH           16
typedef bit<REPLICATION_ID_WIDTH>      ReplicationId_t;
typedef bit<9>                         L1ExclusionId_t;
typedef bit<9>                         L2ExclusionId_t;
#define PORT_METADATA_SIZE             32w64

const bit<16> PARSER_ERROR_OK           = 16w0x0000;
const bit<16> PARSER_ERROR_NO_MATCH     = 16w0x0001;
const bit<16> PARSER_ERROR_PARTIAL_HDR  = 16w0x0002;
const bit<16> PARSER_ERROR_CTR_RANGE    = 16w0x0004;
const bit<16> PARSER_ERROR_TIMEOUT_USER = 16w0x0008;
const bit<16> PARSER_ERROR_TIMEOUT_HW   = 16w0x0010;
const bit<16> PARSER_ERROR_SRC_EXT      = 16w0x0020;
const bit<16> PARSER_ERROR_DST_CONT     = 16w0x0040;
const bit<16> PARSER_ERROR_PHV_OWNER    = 16w0x0080;
const bit<16> PARSER_ERROR_MULTIWRITE   = 16w0x0100;
const bit<16> PARSER_ERROR_ARAM_MBE     = 16w0x0400;
const bit<16> PARSER_ERROR_FCS          = 16w0x0800;

enum MeterType_t { PACKETS, BYTES }
enum bit<8> MeterColor_t { GREEN = 8w0, YELLOW = 8w1, RED = 8w3 }
enum CounterType_t { PACKETS, BYTES, PACKETS_AND_BYTES }
enum SelectorMode_t { FAIR, RESILIENT }
enum HashAlgorithm_t { IDENTITY, RANDOM, XOR8, XOR16, XOR32, CRC8, CRC16, CRC32, CRC64, CUSTOM }

match_kind { range, selector, atcam_partition_index }

error { CounterRange, Timeout, PhvOwner, MultiWrite, IbufOverflow, IbufUnderflow }

@__intrinsic_metadata
header ingress_intrinsic_metadata_t {
    bit<1> resubmit_flag;
    @padding bit<1> _pad1;
    bit<2> packet_version;
    @padding bit<(4 - PORT_ID_WIDTH % 8)> _pad2;
    PortId_t ingress_port;
    bit<48> ingress_mac_tstamp;
}

@__intrinsic_metadata
struct ingress_intrinsic_metadata_for_tm_t {
    PortId_t ucast_egress_port;
    bit<1> bypass_egress;
    bit<1> deflect_on_drop;
    bit<3> ingress_cos;
    QueueId_t qid;
    bit<3> icos_for_copy_to_cpu;
    bit<1> copy_to_cpu;
    bit<2> packet_color;
    bit<1> disable_ucast_cutthru;
    bit<1> enable_mcast_cutthru;
    MulticastGroupId_t mcast_grp_a;
    MulticastGroupId_t mcast_grp_b;
    bit<13> level1_mcast_hash;
    bit<13> level2_mcast_hash;
    L1ExclusionId_t level1_exclusion_id;
    L2ExclusionId_t level2_exclusion_id;
    bit<16> rid;
}

@__intrinsic_metadata
struct ingress_intrinsic_metadata_from_parser_t {
    bit<48> global_tstamp;
    bit<32> global_ver;
    bit<16> parser_err;
}

@__intrinsic_metadata
struct ingress_intrinsic_metadata_for_deparser_t {
    bit<3> drop_ctl;
    DigestType_t digest_type;
    ResubmitType_t resubmit_type;
    MirrorType_t mirror_type;
}

@__intrinsic_metadata
header egress_intrinsic_metadata_t {
    @padding bit<(8 - PORT_ID_WIDTH % 8)> _pad0;
    PortId_t egress_port;
    @padding bit<5> _pad1;
    bit<19> enq_qdepth;
    @padding bit<6> _pad2;
    bit<2> enq_congest_stat;
    @padding bit<14> _pad3;
    bit<18> enq_tstamp;
    @padding bit<5> _pad4;
    bit<19> deq_qdepth;
    @padding bit<6> _pad5;
    bit<2> deq_congest_stat;
    bit<8> app_pool_congest_stat;
    @padding bit<14> _pad6;
    bit<18> deq_timedelta;
    bit<16> egress_rid;
    @padding bit<7> _pad7;
    bit<1> egress_rid_first;
    @padding bit<(8 - QUEUE_ID_WIDTH % 8)> _pad8;
    QueueId_t egress_qid;
    @padding bit<5> _pad9;
    bit<3> egress_cos;
    @padding bit<7> _pad10;
    bit<1> deflection_flag;
    bit<16> pkt_length;
}

@__intrinsic_metadata
struct egress_intrinsic_metadata_from_parser_t {
    bit<48> global_tstamp;
    bit<32> global_ver;
    bit<16> parser_err;
}

@__intrinsic_metadata
struct egress_intrinsic_metadata_for_deparser_t {
    bit<3> drop_ctl;
    MirrorType_t mirror_type;
    bit<1> coalesce_flush;
    bit<7> coalesce_length;
}

@__intrinsic_metadata
struct egress_intrinsic_metadata_for_output_port_t {
    bit<1> capture_tstamp_on_tx;
    bit<1> update_delay_on_tx;
}

extern Checksum {
    Checksum();
    void add<T>(in T data);
    void subtract<T>(in T data);
    bool verify();      // true when the checksum is wrong: bf-p4c's parser error bit
    bit<16> get();
    bit<16> update<T>(in T data, @optional in bool zeros_as_ones);
}

extern Hash<W> {
    Hash(HashAlgorithm_t algo);
    W get<D>(in D data);
}

extern Counter<W, I> {
    Counter(bit<32> size, CounterType_t type);
    void count(in I index);
}

extern Register<T, I> {
    Register(bit<32> size);
    Register(bit<32> size, T initial_value);
    T read(in I index);
    T write(in I index, in T value);
}

extern RegisterAction<T, I, U> {
    RegisterAction(Register<T, I> reg);
    U execute(in I index);
    abstract void apply(inout T value, @optional out U rv);
    // In apply: bit (2 * cmphi + cmplo) set, an absent condition false (an assumption: the
    // reference documents "the 4-bit predicate value" only).
    U predicate(@optional in bool cmplo, @optional in bool cmphi);
}

parser IngressParserT<H, M>(
    packet_in pkt,
    out H hdr,
    out M ig_md,
    out ingress_intrinsic_metadata_t ig_intr_md);

parser EgressParserT<H, M>(
    packet_in pkt,
    out H hdr,
    out M eg_md,
    out egress_intrinsic_metadata_t eg_intr_md);

control IngressT<H, M>(
    inout H hdr,
    inout M ig_md,
    in ingress_intrinsic_metadata_t ig_intr_md,
    in ingress_intrinsic_metadata_from_parser_t ig_intr_prsr_md,
    inout ingress_intrinsic_metadata_for_deparser_t ig_intr_dprsr_md,
    inout ingress_intrinsic_metadata_for_tm_t ig_intr_tm_md);

control EgressT<H, M>(
    inout H hdr,
    inout M eg_md,
    in egress_intrinsic_metadata_t eg_intr_md,
    in egress_intrinsic_metadata_from_parser_t eg_intr_md_from_prsr,
    inout egress_intrinsic_metadata_for_deparser_t eg_intr_md_for_dprsr,
    inout egress_intrinsic_metadata_for_output_port_t eg_intr_md_for_oport);

control IngressDeparserT<H, M>(
    packet_out pkt,
    inout H hdr,
    in M metadata,
    in ingress_intrinsic_metadata_for_deparser_t ig_intr_dprsr_md);

control EgressDeparserT<H, M>(
    packet_out pkt,
    inout H hdr,
    in M metadata,
    in egress_intrinsic_metadata_for_deparser_t eg_intr_dprsr_md);

package Pipeline<IH, IM, EH, EM>(
    IngressParserT<IH, IM> ingress_parser,
    IngressT<IH, IM> ingress,
    IngressDeparserT<IH, IM> ingress_deparser,
    EgressParserT<EH, EM> egress_parser,
    EgressT<EH, EM> egress,
    EgressDeparserT<EH, EM> egress_deparser);

package Switch<IH0, IM0, EH0, EM0>(Pipeline<IH0, IM0, EH0, EM0> pipe0);

#endif /* _TOFINO1_NATIVE_ARCHITECTURE_ */
