/* Every type of the public header, for the ABI description of the header's
 * types (tests/abi/nanosrv-types.abi): built with
 * -fno-eliminate-unused-debug-types so the enums, whose values no function
 * signature carries, reach the debug information that abidw reads. */
#include <nanosrv.h>

NSV_API int nsv_abi_types(void);
int nsv_abi_types(void) { return 0; }
