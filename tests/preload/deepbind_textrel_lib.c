/* A library with a text relocation (non-PIC code naming pthread_mutex_lock
 * in .text, linked with -z notext): its code page is read-only when the
 * shim rebinds it. */
__asm__(
    "  .text\n"
    "  .globl deepbind_textrel_lock_addr\n"
    "  .type deepbind_textrel_lock_addr, @function\n"
    "deepbind_textrel_lock_addr:\n"
    "  movabs $pthread_mutex_lock, %rax\n"
    "  ret\n"
    "  .size deepbind_textrel_lock_addr, .-deepbind_textrel_lock_addr\n");
