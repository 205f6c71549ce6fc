#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"

namespace llmctl {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;  // writes smaller than this are gathered

std::string reason(int err) { return std::strerror(err); }

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

// /dev/stdout, /dev/fd/3, /proc/self/fd/1: links to a descriptor the caller gave us. Even when
// it is a regular file (`> log`), replacing it would leave the descriptor on the old inode.
bool names_a_descriptor(const std::string& path) {
  return path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0;
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

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  const std::string kind = non_regular_kind(path_);
  if (kind == "a character device" || kind == "a FIFO" ||
      (kind.empty() && names_a_descriptor(path_) && ::access(path_.c_str(), F_OK) == 0)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw FileError(path_, "cannot open for writing: " + reason(errno));
    return;
  }
  if (!kind.empty())
    throw FileError(path_, "is " + kind + ", not a file; refusing to replace it",
                    FileError::kNoOffset, "give the path of a regular file");
  std::vector<char> tmp(path_.begin(), path_.end());
  for (char c : std::string_view(".tmp-XXXXXX")) tmp.push_back(c);
  tmp.push_back('\0');
  fd_ = ::mkstemp(tmp.data());
  if (fd_ < 0) throw FileError(path_, "cannot create a file beside it: " + reason(errno));
  tmp_path_ = tmp.data();
  // mkstemp creates 0600; a written file gets the usual 0666 minus the umask (which can only
  // be read by setting it; the tool is single-threaded wherever it opens files).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

void OutputFile::write_fd(std::string_view bytes) {
  if (fd_ < 0) throw FileError(path_, "written after it was committed");
  if (!write_all(fd_, bytes)) throw FileError(path_, "cannot write: " + reason(errno));
}

void OutputFile::write(std::string_view bytes) {
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.append(bytes);
    return;
  }
  write_fd(buffer_);
  buffer_.clear();
  if (bytes.size() >= kBufferBytes)
    write_fd(bytes);
  else
    buffer_.append(bytes);
}

void OutputFile::commit() {
  write_fd(buffer_);
  buffer_.clear();
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw FileError(path_, "cannot write: " + reason(errno));
  if (!tmp_path_.empty() && ::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    throw FileError(path_, "cannot write: " + reason(errno));
  committed_ = true;
}

AppendFile::AppendFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw FileError(path_, "cannot open for appending: " + reason(errno));
}

AppendFile::~AppendFile() { ::close(fd_); }

void AppendFile::append(std::string_view bytes) {
  if (!write_all(fd_, bytes)) throw FileError(path_, "cannot append: " + reason(errno));
}

void write_output_file(const std::string& path, std::string_view bytes) {
  OutputFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace llmctl
