// expect: 4:24|unexpected 'foo_t' (not a declared type)
#include <core.p4>
#include <v1model.p4>
struct m_t { bit<8> a; foo_t b; }
