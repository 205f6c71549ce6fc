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

// Writes bytes to fd and closes it; 0, or the errno of the first failure.
int write_and_close(int fd, std::string_view bytes) {
  const int err = write_all(fd, bytes) ? 0 : errno;
  return ::close(fd) != 0 && err == 0 ? errno : err;
}

void write_in_place(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, "cannot open for writing: " + reason());
  if (const int err = write_and_close(fd, bytes); err != 0)
    throw FileError(path, std::string("cannot write: ") + std::strerror(err));
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
  // mkstemp creates 0600; a written file gets the usual 0666 minus the umask (which can only
  // be read by setting it; the tool is single-threaded wherever it writes files).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  int err = write_and_close(fd, bytes);
  if (err == 0 && ::rename(tmp_path.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp_path.c_str());
    throw FileError(path, std::string("cannot write: ") + std::strerror(err));
  }
}

}  // namespace llmctl
