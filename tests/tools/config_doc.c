/* config_doc.c: prints docs/config.md from the key table (va_config_print_markdown). The test
 * config_doc compares its output with the committed page; regenerate with
 * build/config_doc > docs/config.md. */
#include <stdio.h>

#include "core/config.h" /* va_config_print_markdown */

int main(void) {
  va_config_print_markdown(stdout);
  return ferror(stdout) ? 1 : 0;
}
