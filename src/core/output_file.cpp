#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace llmctl {

namespace {

std::string reason() { return std::strerror(errno); }

// Writes all of bytes to fd; false with errno set on the first failure.
bool write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void write_in_place(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, "cannot open for writing: " + reason());
  const bool ok = write_all(fd, bytes);
  const int saved = errno;
  const bool closed = ::close(fd) == 0;
  if (!ok) {
    errno = saved;
    throw FileError(path, "cannot write: " + reason());
  }
  if (!closed) throw FileError(path, "cannot write: " + reason());
}

}  // namespace

std::string non_regular_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "not a regular file";
}

void write_output_file(const std::string& path, std::string_view bytes) {
  const std::string kind = non_regular_kind(path);
  if (kind == "a character device" || kind == "a FIFO") return write_in_place(path, bytes);
  if (!kind.empty())
    throw FileError(path, "is " + kind + ", not a file; refusing to replace it",
                    FileError::kNoOffset, "give the path of a regular file");
  std::vector<char> tmp(path.begin(), path.end());
  for (char c : std::string_view(".tmp-XXXXXX")) tmp.push_back(c);
  tmp.push_back('\0');
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw FileError(path, "cannot create a file beside it: " + reason());
  const std::string tmp_path(tmp.data());
  // mkstemp creates 0600; a written file gets the usual 0666 minus the umask.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  const bool ok = write_all(fd, bytes);
  int saved = errno;
  const bool closed = ::close(fd) == 0;
  if (ok && !closed) saved = errno;
  if (!ok || !closed || ::rename(tmp_path.c_str(), path.c_str()) != 0) {
    if (ok && closed) saved = errno;
    ::unlink(tmp_path.c_str());
    errno = saved;
    throw FileError(path, "cannot write: " + reason());
  }
}

}  // namespace llmctl
