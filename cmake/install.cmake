# install.cmake: `cmake --install build --prefix P` gives a working P/bin/vecanneal with what a cluster
# user needs beside it: the configs and Slurm scripts (P/share/vecanneal, the layout the scripts expect:
# they find configs/ two folders above themselves and the binary in P/bin), the Python index reader,
# the manual (P/share/doc/vecanneal) and the license. The embedding model is not installed: embed finds
# it through --model, $VECANNEAL_MODEL or ./models (docs/embed.md).
include(GNUInstallDirs)
install(TARGETS vecanneal RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(VA_SHARE ${CMAKE_INSTALL_DATADIR}/vecanneal)
install(DIRECTORY configs/ DESTINATION ${VA_SHARE}/configs FILES_MATCHING PATTERN "*.ini")
install(PROGRAMS jobs/slurm/common.sh DESTINATION ${VA_SHARE}/jobs/slurm)
install(DIRECTORY jobs/slurm/ DESTINATION ${VA_SHARE}/jobs/slurm FILES_MATCHING PATTERN "*.sbatch"
        PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/python)
  install(DIRECTORY python/ DESTINATION ${VA_SHARE}/python FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
endif()
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
