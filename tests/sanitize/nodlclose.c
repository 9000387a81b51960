/* nodlclose.c: an LD_PRELOAD shim for the sanitizer tree (asan_tree.sh) whose dlclose() does nothing.
 * Open MPI dlclose()s its plug-ins (mca_*.so) in MPI_Finalize, before LeakSanitizer runs at exit; a
 * leak allocated inside an unloaded plug-in then has an "<unknown module>" frame (or one attributed to
 * whatever got mapped there since) that no suppression can name. With the plug-ins kept mapped, the
 * frames name them and tests/sanitize/lsan.supp matches. Nothing else changes: a process that exits
 * anyway loses nothing by keeping its libraries loaded. */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
