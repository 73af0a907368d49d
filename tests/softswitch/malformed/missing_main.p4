// expect: 4:1|no 'main' package instantiation
#include <core.p4>
#include <v1model.p4>
