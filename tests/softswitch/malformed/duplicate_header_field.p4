// expect: 4:24|a: duplicate field in h_t
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> a; }
