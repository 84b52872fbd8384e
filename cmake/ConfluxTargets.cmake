# Per-target settings shared by every Conflux target.
function(conflux_target_settings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(CONFLUX_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# libFuzzer targets fuzz/fuzz_<name>.cc for each name, linked to `library` (scripts/fuzz.sh
# runs them). The library under test is instrumented too, so coverage reaches into it, not
# only into the harness.
function(conflux_fuzz_targets library)
  target_compile_options(${library} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  foreach(t ${ARGN})
    add_executable(fuzz_${t} fuzz/fuzz_${t}.cc)
    target_link_libraries(fuzz_${t} PRIVATE ${library})
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined)
  endforeach()
endfunction()
