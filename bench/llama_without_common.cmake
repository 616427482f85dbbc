# Included before each project() of llama-cpp-python's build (CMAKE_PROJECT_INCLUDE_BEFORE).
# llama-cpp-python forces LLAMA_BUILD_COMMON ON, yet its Python package never loads
# libllama-common (only the multimodal library would, and it is not built: LLAVA_BUILD=OFF).
# With it switched off again before llama.cpp's own project(), common and its HTTP library are not
# compiled: measured, about half of the build's compile time.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp common library: not loaded by llama_cpp" FORCE)
