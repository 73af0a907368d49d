// expect: 2:10|preprocessor: no_such_file.p4: No such file or directory
#include <no_such_file.p4>
