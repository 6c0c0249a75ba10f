/*
 * The impi-server command run by the unit tests: started with arguments,
 * its "ADDR:PORT" line read, its exit status and stderr collected; killed
 * if still running when the object goes.
 */
#ifndef ICBC_TEST_IMPI_DAEMON_H
#define ICBC_TEST_IMPI_DAEMON_H

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

struct Daemon {
    pid_t pid = -1;
    int out = -1, errfd = -1;
    std::string addr;
    uint16_t port = 0;

    bool start(std::vector<std::string> args)
    {
        int po[2], pe[2];
        if (pipe(po) || pipe(pe))
            return false;
        pid = fork();
        if (pid == 0) {
            dup2(po[1], 1);
            dup2(pe[1], 2);
            std::vector<char *> argv;
            args.insert(args.begin(), IMPI_SERVER_BIN);
            for (auto &a : args)
                argv.push_back(&a[0]);
            argv.push_back(nullptr);
            execv(IMPI_SERVER_BIN, argv.data());
            _exit(127);
        }
        close(po[1]);
        close(pe[1]);
        out = po[0];
        errfd = pe[0];
        std::string line;
        char c;
        while (read(out, &c, 1) == 1 && c != '\n')
            line += c;
        size_t colon = line.rfind(':');
        if (colon == std::string::npos)
            return false;
        addr = line.substr(0, colon);
        port = (uint16_t) std::stoi(line.substr(colon + 1));
        return true;
    }
    /* exit status, and what it wrote on stderr */
    int wait(std::string *errtext)
    {
        int st = 0;
        waitpid(pid, &st, 0);
        pid = -1;
        char buf[1024];
        ssize_t n;
        while ((n = read(errfd, buf, sizeof(buf))) > 0)
            errtext->append(buf, (size_t) n);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    ~Daemon()
    {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        if (out >= 0)
            close(out);
        if (errfd >= 0)
            close(errfd);
    }
};

#endif /* ICBC_TEST_IMPI_DAEMON_H */
