#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "core/error.h"

namespace llmctl {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw FileError(path, fmt::format("cannot stat: {}", std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw FileError(path, "is a directory, expected a file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw FileError(path, fmt::format("cannot map {} bytes: {}", size_, std::strerror(err)));
    }
    data_ = static_cast<const uint8_t*>(p);
    // Weights are read front to back on every token: ask the kernel to start reading the
    // file in now (asynchronously) rather than page-faulting through it during the first
    // forward pass. Advisory; a failure changes nothing.
    ::madvise(p, size_, MADV_WILLNEED);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

bool in_read_only_file_mapping(const void* p, size_t bytes) {
  std::ifstream maps("/proc/self/maps");
  const auto begin = reinterpret_cast<uintptr_t>(p);
  // "start-end perms offset dev inode path": inode 0 is anonymous memory
  for (std::string line; std::getline(maps, line);) {
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    char perms[8] = {}, dev[32] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %31s %llu", &start, &end, perms, &offset, dev,
                    &inode) != 6)
      continue;
    if (begin < start || begin >= end) continue;
    return begin + bytes <= end && inode != 0 && perms[1] == '-';
  }
  return false;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace llmctl
