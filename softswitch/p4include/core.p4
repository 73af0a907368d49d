/* core.p4 for the softswitch embedded target.
 * Same declarations as p4c's p4include/core.p4 (P4_16 core library), so programs written
 * against p4c compile unchanged. */
#ifndef _CORE_P4_
#define _CORE_P4_

/// Standard error codes.
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

extern packet_out {
    void emit<T>(in T hdr);
}

extern void verify(in bool check, in error toSignal);

/// Checked when compiling: a false check fails the compile with the message.
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

#endif  /* _CORE_P4_ */
